"""The doctor's fix texts and the troubleshooting guide that must show each word for word.

    fixes_in_source()      every fix text written in src/doctor/doctor*.c: the literals given to
                           doctor_fix() and the fix_*/FIX_* constants (adjacent literals joined)
    undocumented(fixes)    those of @fixes that docs/troubleshooting.md does not show
    assert_documented(report)   for a test: every fix in a doctor --json report is in the guide

Texts are compared with runs of white space made one space, so the guide may wrap them.
"""

import glob
import os
import re

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GUIDE = os.path.join(SRC, "docs", "troubleshooting.md")

_LIT = r'"(?:[^"\\\n]|\\.)*"'
_LITS = rf"((?:{_LIT}\s*)+)"
_PATTERNS = [
    re.compile(rf"\b(?:FIX_\w+|fix_\w+)\s*(?:\[\])?\s*=\s*{_LITS}"),
    re.compile(rf"#define\s+(?:FIX_\w+|fix_\w+)\s+\(?\s*{_LITS}"),
    re.compile(rf"\bdoctor_fix\(\s*[\w.>-]+\s*,\s*{_LITS}\)"),
    re.compile(rf"\.fix\s*=\s*{_LITS}"),
    re.compile(rf"\bfix\s*=\s*{_LITS};"),
    re.compile(rf"\bdoctor_fix\(\s*\w+\s*,\s*\w+\s*\?\s*\w+\s*:\s*{_LITS}\)"),
    re.compile(rf"\bboot_finding\(\s*b\s*,\s*\w+\s*,\s*{_LITS},"),
]
# doctor-host.c's per-unit fixes: ENABLE("u") and UNMASK("u"), maybe followed by literals.
_UNIT = re.compile(rf'\b(ENABLE|UNMASK)\("([^"]+)"\)((?:\s*{_LIT})*)')


def _unquote(lits):
    out = []
    for m in re.finditer(_LIT, lits):
        s = m.group(0)[1:-1]
        out.append(re.sub(r"\\(.)", lambda e: {"n": "\n", "t": "\t"}.get(e.group(1), e.group(1)), s))
    return "".join(out)


def norm(text):
    return " ".join(text.split())


def fixes_in_source():
    found = set()
    for path in sorted(glob.glob(os.path.join(SRC, "src", "doctor", "doctor*.[ch]"))):
        code = open(path, encoding="utf-8").read().replace("\\\n", " ")
        for m in _UNIT.finditer(code):
            u = m.group(2)
            head = (f"systemctl enable --now {u}" if m.group(1) == "ENABLE" else
                    f"systemctl unmask {u} && systemctl enable --now {u}")
            found.add(head + _unquote(m.group(3)))
        for pat in _PATTERNS:
            for m in pat.finditer(code):
                found.add(_unquote(m.group(1)))
    return found


def undocumented(fixes):
    guide = norm(open(GUIDE, encoding="utf-8").read())
    return sorted(f for f in fixes if norm(f) not in guide)


def assert_documented(report):
    missing = undocumented({c["fix"] for c in report["checks"] if c.get("fix")})
    if missing:
        raise AssertionError("docs/troubleshooting.md does not show these fixes word for word:\n"
                             + "\n".join(missing))
