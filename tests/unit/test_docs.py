"""The README is a front door: its first screen has the two set-up commands and the fleet command, every page
of docs/ is linked from it, and every relative link in the README, CONTRIBUTING.md and docs/ resolves."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code blocks hold no links
    return LINK.findall(text)


def test_every_relative_link_resolves():
    broken = []
    for page in PAGES:
        for target in links(page):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            path = (page.parent / target.split("#")[0]).resolve()
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, "links that resolve to nothing:\n" + "\n".join(broken)


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / t).resolve() for t in links(ROOT / "README.md")}
    orphans = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if p.resolve() not in linked]
    assert not orphans, f"docs pages the README does not link: {orphans}"


def test_the_first_screen_gives_the_two_set_up_commands_and_the_fleet_command():
    first = "\n".join((ROOT / "README.md").read_text().splitlines()[:30])
    commands = re.findall(r"^make (\w+)", first, flags=re.M)
    assert commands == ["sweep", "test"], commands
    assert "ansible-playbook sweep.yml -i inventory/gpu_hosts.yml -e @sweeps/qwen2_7b.yml" in first


# a comment's pointer into the docs: (README, "Section") or (docs/page.md, "a heading or phrase of it")
POINTER = re.compile(r'\((README|[\w/.-]+\.md), "([^"]+)"\)')


def test_every_pointer_from_a_config_comment_into_the_docs_finds_its_text():
    """ansible.cfg, the group_vars and the roles' defaults point at a page and a phrase of it; both must be there
    (ansible.cfg once sent readers to a README section that did not exist)."""
    configs = [
        ROOT / "ansible.cfg",
        *sorted(ROOT.glob("group_vars/**/*.yml")),
        *sorted(ROOT.glob("roles/*/defaults/*.yml")),
    ]
    found = []
    for config in configs:
        text = " ".join(line.lstrip("# ").strip() for line in config.read_text().splitlines() if "#" in line)
        for page, phrase in POINTER.findall(text):
            found.append((config.name, page))
            target = ROOT / ("README.md" if page == "README" else page)
            assert target.is_file(), f"{config}: points at {page}, which does not exist"
            assert " ".join(phrase.split()) in " ".join(target.read_text().split()), (
                f"{config}: {page} has no {phrase!r}"
            )
    assert ("ansible.cfg", "docs/trust.md") in found


def test_the_model_source_settings_table_names_settings_the_download_stage_reads():
    """docs/sweeps.md's table of where models come from (they were documented only in role defaults): each setting
    is one the lane's download stage reads, and each of those is in the table."""
    page = (ROOT / "docs" / "sweeps.md").read_text()
    table = page.split("Where the models come from", 1)[1].split("\n\n", 2)[1]
    named = set(re.findall(r"^\| `(\w+)", table, re.MULTILINE))
    stage = (ROOT / "src" / "trtsweep" / "lane" / "point.py").read_text()
    read = set(re.findall(r'"(trtsweep_hf_offline|hf_download_(?:token|endpoint|mirror_dir|source))"', stage))
    assert named == read == {"hf_download_token", "trtsweep_hf_offline", "hf_download_endpoint",
                             "hf_download_mirror_dir", "hf_download_source"}  # fmt: skip
