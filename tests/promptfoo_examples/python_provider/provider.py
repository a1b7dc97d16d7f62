"""promptfoo's example Python provider, answering deterministically (no network): a marketer."""


def call_api(prompt, options, context):
    topic = context["vars"]["topic"]
    text = (
        f"Bananamax loves {topic}! 🍌"
        if topic != "turtles"
        else f"Slow and steady: {topic} win. 🐢"
    )
    return {
        "output": text,
        "tokenUsage": {"total": 12, "prompt": 8, "completion": 4},
        "metadata": {"config": options.get("config", {})},
    }
