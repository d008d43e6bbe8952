"""The documentation site's configuration and the README's first steps (the site itself is built
by ``.ci/run`` with ``mkdocs build --strict``)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _nav_pages() -> set[str]:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text[text.index("\nnav:") : text.index("\nmarkdown_extensions:")]
    return set(re.findall(r":\s*([\w/.-]+\.md)\s*$", nav, flags=re.M))


def test_every_docs_page_is_in_the_site_nav() -> None:
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    nav = _nav_pages()
    assert pages - nav == set(), f"pages missing from mkdocs.yml's nav: {sorted(pages - nav)}"
    assert nav - pages == set(), f"nav entries without a page: {sorted(nav - pages)}"


def test_the_api_reference_covers_the_public_scg_api() -> None:
    import scg

    reference = (ROOT / "docs" / "reference" / "scg.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^::: scg\.(\w+)", reference, flags=re.M))
    public = {name for name in scg.__all__ if not name.startswith("_")}

    def covered(name: str) -> bool:  # documented itself, or with the submodule defining it
        obj = getattr(scg, name)
        module = str(getattr(obj, "__module__", None) or getattr(obj, "__name__", ""))
        return name in documented or module.split(".")[1:2] in ([sub] for sub in documented)

    missing = sorted(name for name in public if not covered(name))
    assert not missing, f"not in docs/reference/scg.md: {missing}"
    assert {"testing", "viz"} <= documented  # the public submodules beyond __all__


def test_ci_builds_the_site_strictly_with_the_docs_extra() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert any(req.startswith("mkdocs") for req in extras["docs"])
    assert any(req.startswith("mkdocstrings[python]") for req in extras["docs"])
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert '".[docs]"' in ci and "mkdocs build --strict" in ci


def test_readme_set_up_is_followed_by_the_main_job() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", readme, flags=re.S)
    setup = next(b for b in blocks if "pip install" in b)
    lines = [line.strip() for line in setup.strip().splitlines()]
    assert lines[0].startswith("python3 -m venv") and "pip install -e" in lines[0]
    assert lines[-1].startswith("scg-summarize demo")  # set-up, tests, then the main job
