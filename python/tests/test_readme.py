"""The README's Python example runs as written, and prints what it says."""

import contextlib
import io
import pathlib
import re


def test_readme_example(tmp_path, monkeypatch):
    readme = pathlib.Path(__file__).resolve().parents[2] / "README.md"
    section = readme.read_text().split("## From Python", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    lines = out.getvalue().splitlines()
    assert lines[0] == "[('DE', 600), ('FR', 700)] plane"
    assert "year" in lines[1] and "COUNT(*)" in lines[1]
