"""The docs' examples are tests (SPEC §21), run by the root conftest.py's sybil set-up.

It fails a page whose eval example the plugin would reject, or whose Python does not run, and says
where.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT_CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"
PAGE = """\
# A page

```yaml
cases:
  - {id: good, input: hi, expect: {contains: [hi]}}
```

```yaml
cases:
  - {id: bad, input: hi, expect: {contians: [hi]}}
```

<!-- example: file-fields -->
```yaml
agent: {url: "http://127.0.0.1:1/chat", output: data.answer}
```

<!-- example: compile -->
```python
from myproject import nothing_here
```

```python
raise RuntimeError("this example does not run")
```
"""


def test_a_bad_example_fails_naming_its_page_and_line(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(ROOT_CONFTEST.read_text(encoding="utf-8"))
    (pytester.path / "docs").mkdir()
    (pytester.path / "docs" / "page.md").write_text(PAGE, encoding="utf-8")
    result = pytester.runpytest("-p", "no:cacheprovider", "docs", "-rf")
    result.assert_outcomes(passed=3, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*docs/page.md:8: the example is not a valid eval file (native, 1 case):",
            "*unknown check 'contians'*",
            "*RuntimeError: this example does not run*",
        ]
    )
