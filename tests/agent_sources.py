"""Source of agent modules that tests write into pytester directories."""

SCRIPTED_AGENT = '''
import asyncio, time

def run(query, context):
    """Answers from the case's context: `say` is the output, `calls` the tool calls it reports."""
    if context.get("raise"):
        raise RuntimeError(context["raise"])
    if context.get("sleep"):
        time.sleep(context["sleep"])
    return {"output": context.get("say", query), "tools_called": context.get("calls", [])}

async def arun(query, context):
    if context.get("sleep"):
        await asyncio.sleep(context["sleep"])
    return {"output": context.get("say", "async " + query), \
"tools_called": context.get("calls", [])}
'''
