"""The sections of docs/BENCHMARKS.md that scripts write.

cmd/benchdoc (scripts/bench-all.sh) writes the page up to the first
marker line "<!-- Written by scripts/NAME from here to the next such line
or the end. -->"; each such section is its script's, from its marker to the
next marker or the page's end, so each script rewrites its own and keeps
the others.
"""

PREFIX = "<!-- Written by scripts/"


def marker(script):
    """The marker line of script's section (script: e.g. "bench-doors.sh")."""
    return f"{PREFIX}{script} from here to the next such line or the end. -->"


def split(text, script):
    """The page before script's section, and the sections after it.

    A page without the section keeps every other script's section after
    it: the new section goes at the end.
    """
    m = "\n" + marker(script) + "\n"
    before, found, after = text.partition(m)
    if not found:
        return text.rstrip("\n") + "\n", ""
    i = after.find("\n" + PREFIX)
    rest = after[i + 1:] if i >= 0 else ""
    return before.rstrip("\n") + "\n", rest


def write(page, before, section_lines, rest):
    """Writes the page: before, the section's lines, then the rest."""
    text = before + "\n" + "\n".join(section_lines) + "\n"
    if rest:
        text += "\n" + rest
    open(page, "w").write(text)


def rewrite(page, script, lines):
    """Rewrites script's section of page: its marker, then lines."""
    before, rest = split(open(page).read(), script)
    write(page, before, [marker(script)] + lines, rest)


def fenced(path):
    """A script's saved output, as the lines of a fenced block."""
    return ["```", open(path).read().rstrip("\n"), "```"]
