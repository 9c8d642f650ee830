#!/usr/bin/python3
"""The doctor's documentation says what the code does: every fix text in src/doctor/doctor*.c is shown
word for word in docs/troubleshooting.md, every check id the code can report is described in
docs/doctor.md, and the guide names no check the code does not have. (Each doctor test also
checks every fix in every report it gets: tests/doctor/fixes.py.)"""

import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixes  # noqa: E402

SRC = fixes.SRC
ID = re.compile(r"(?<![\w./-])(?:driver|runtime|plugin|compat)\.[a-z0-9]+(?:-[a-z0-9]+)*(?![\w.])")


def read(*path):
    return open(os.path.join(SRC, *path), encoding="utf-8").read()


def ids_in_code():
    ids = set()
    for name in os.listdir(os.path.join(SRC, "src", "doctor")):
        if name.startswith("doctor") and name.endswith(".c"):
            # String literals only, header names (#include "plugin.h") are not checks.
            ids |= {i for i in re.findall(r'"((?:driver|runtime|plugin|compat)\.[a-z0-9-]+)"',
                                          read("src", "doctor", name)) if not re.search(r"\.[ch]$", i)}
    return ids


class Docs(unittest.TestCase):
    def test_every_fix_in_the_code_is_in_the_guide(self):
        found = fixes.fixes_in_source()
        # The extraction itself must see the fixes, or this test proves nothing.
        self.assertGreater(len(found), 50)
        self.assertEqual(fixes.undocumented(found), [])

    def test_a_changed_fix_is_caught(self):
        some = sorted(fixes.fixes_in_source())[0]
        self.assertEqual(fixes.undocumented({some + " (changed)"}), [some + " (changed)"])

    def test_every_check_is_described(self):
        code = ids_in_code()
        self.assertGreater(len(code), 15)
        table = set(re.findall(r"^\| `([a-z]+\.[a-z0-9-]+)` \|", read("docs", "doctor.md"), re.M))
        self.assertEqual(code - table, set(), "checks missing from docs/doctor.md")
        self.assertEqual(table - code, set(), "docs/doctor.md describes checks the code lacks")

    def test_the_guide_names_only_real_checks(self):
        code = ids_in_code()
        for doc in ("troubleshooting.md", "doctor.md", "install.md"):
            named = set(ID.findall(read("docs", doc)))
            self.assertEqual(named - code, set(), f"docs/{doc} names unknown checks")


if __name__ == "__main__":
    unittest.main(verbosity=2)
