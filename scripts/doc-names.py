#!/usr/bin/env python3
"""Every name the documents give in backquotes is in the code (docs/ARCHITECTURE.md §2, "The names, checked").

    scripts/doc-names.py check [ROOT]      the names in README.md and docs/*.md against the sources (make lint)
    scripts/doc-names.py self-test [ROOT]  shows `check` passing on a copy of the tree, then failing on each kind of
                                             stale name it exists for, naming it

`check` reads each `backquoted` span and fails, naming the document and line, on:

- a type (`TrustedFile`) that no Swift source declares (struct, enum, class, protocol, actor, typealias or
  extension) and that is not a target in Package.swift;
- a member (`OneTimeCode.mismatchFingerprint`, `ExitStatus.status(for:)`) or nested type (`Prompt.Wake`) that none
  of the files declaring or extending its type declares (func, var, let or case; struct, enum, class, protocol,
  actor or typealias): a member that moved to another type is stale;
- a file (`Relay.swift`) that no source folder holds, or a path (`scripts/pg-cluster.sh`, `Plugins/FIDO2/Key`)
  that does not exist;
- one of Keyway's C or SQL functions (`keyway_errno`, `keyway_is_use(…)`) that no source mentions.

Names of other projects' code (libpq's, X11's, fprintd's D-Bus, Apple's LocalAuthentication, the Swift standard
library's) are listed in ELSEWHERE; placeholders (`NAME`) in PLACEHOLDERS. Anything else a span holds (commands,
options, prose) is not a name and is not checked.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

DOCUMENTS = ["README.md", "docs/*.md"]
SOURCE_FOLDERS = ["Sources", "Plugins", "pam", "Tests"]
PATH_ROOTS = ["Sources", "Plugins", "pam", "Tests", "scripts", "docs", "man", "systemd", "debian", "Benchmarks"]

# Names the documents give from code that is not Keyway's, each with whose it is.
ELSEWHERE = {
    "AnyObject": "Swift", "Dictionary": "Swift", "Substring": "Swift", "Glibc": "Swift's libc module",
    "KeywayPackageTests": "SwiftPM's test bundle", "LAContext": "Apple's LocalAuthentication",
    "LAError": "Apple's LocalAuthentication", "XLookupString": "Xlib", "PQsendQueryParams": "libpq",
    "PrepareForSleep": "logind's D-Bus signal", "EnrollStatus": "fprintd's D-Bus signal",
    "DeleteEnrolledFinger2": "fprintd's D-Bus method",
}
PLACEHOLDERS = {"NAME", "PATH", "Tests/NAMETests", "Type", "Type.member", "Type.Nested"}

TYPE_OR_MEMBER = re.compile(r"^([A-Z][A-Za-z0-9]+)(?:\.([A-Za-z][A-Za-z0-9]*))?(?:\(.*\))?$")
SWIFT_FILE = re.compile(r"^([A-Z][A-Za-z0-9]+)\.swift$")
FUNCTION = re.compile(r"^(keyway_[a-z0-9_]+)(?:\(.*\))?$")
PATH = re.compile(r"^(?:" + "|".join(PATH_ROOTS) + r")/[\w./-]*$")
DECLARATION = re.compile(r"\b(?:struct|enum|class|protocol|actor|extension|typealias)\s+([A-Z][A-Za-z0-9_]*)")


class Sources:
    """What the tree declares: the files declaring or extending each type, the Swift file names, the targets, and
    every source's text for the C and SQL functions."""

    def __init__(self, root):
        self.root = root
        self.swift = {}
        for folder in SOURCE_FOLDERS:
            for path in glob.glob(os.path.join(root, folder, "**", "*.swift"), recursive=True):
                with open(path, encoding="utf-8", errors="replace") as file:
                    self.swift[path] = file.read()
        self.declaring = {}
        for path, text in self.swift.items():
            for match in DECLARATION.finditer(text):
                self.declaring.setdefault(match.group(1), set()).add(path)
        self.file_names = {os.path.basename(path) for path in self.swift}
        with open(os.path.join(root, "Package.swift"), encoding="utf-8") as file:
            self.targets = set(re.findall(r'"([A-Za-z0-9_-]+)"', file.read()))
        others = []
        for folder in SOURCE_FOLDERS + ["scripts"]:
            for pattern in ("*.c", "*.h", "*.sh", "*.sql"):
                for path in glob.glob(os.path.join(root, folder, "**", pattern), recursive=True):
                    with open(path, encoding="utf-8", errors="replace") as file:
                        others.append(file.read())
        self.everything = "\n".join(list(self.swift.values()) + others)

    def problem(self, span):
        """Why `span` names nothing in the code, or None (also for a span that is not a name)."""
        if span in PLACEHOLDERS or span in ELSEWHERE:
            return None
        match = SWIFT_FILE.match(span)
        if match:
            return None if span in self.file_names else f"no source file is named {span}"
        match = TYPE_OR_MEMBER.match(span)
        if match:
            kind, member = match.group(1), match.group(2)
            if kind in ELSEWHERE:
                return None
            if kind not in self.declaring:
                return None if kind in self.targets else f"no source declares the type {kind}"
            if member is None:
                return None
            if member[0].isupper():
                declared = re.compile(r"\b(?:struct|enum|class|protocol|actor|typealias)\s+" + member + r"\b")
            else:
                declared = re.compile(
                    r"\b(?:func|var|let|case)\s+`?" + member + r"\b|\bcase\b[^\n]*[ ,]" + member + r"\b")
            if any(declared.search(self.swift[path]) for path in self.declaring[kind]):
                return None
            return f"{kind} declares no member {member} (in {', '.join(sorted(self.relative(p) for p in self.declaring[kind]))})"
        match = FUNCTION.match(span)
        if match:
            name = match.group(1)
            return None if re.search(r"\b" + name + r"\b", self.everything) else f"no source mentions {name}"
        if PATH.match(span):
            path = os.path.join(self.root, span.rstrip("/"))
            return None if os.path.exists(path) or glob.glob(path) else f"{span} does not exist"
        return None

    def relative(self, path):
        return os.path.relpath(path, self.root)


def documents(root):
    found = []
    for pattern in DOCUMENTS:
        found += sorted(glob.glob(os.path.join(root, pattern)))
    return found


def check(root):
    sources = Sources(root)
    problems = []
    names = 0
    for document in documents(root):
        with open(document, encoding="utf-8") as file:
            lines = file.read().splitlines()
        for number, line in enumerate(lines, 1):
            for span in re.findall(r"`([^`\n]+)`", line):
                if TYPE_OR_MEMBER.match(span) or SWIFT_FILE.match(span) or FUNCTION.match(span) or PATH.match(span):
                    names += 1
                reason = sources.problem(span)
                if reason:
                    problems.append(f"{os.path.relpath(document, root)}:{number}: `{span}`: {reason}")
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"doc-names: {len(problems)} name(s) in the documents that the code does not have", file=sys.stderr)
        return 1
    print(f"doc-names: the {names} names in {len(documents(root))} documents are in the code")
    return 0


def append(root, text):
    with open(os.path.join(root, "docs", "ARCHITECTURE.md"), "a", encoding="utf-8") as file:
        file.write("\n" + text + "\n")


# Each case edits a copy of the tree and returns the pattern the failure must match.
def case_member_moved(root):
    append(root, "The fingerprint is `TOTPKeeper.mismatchFingerprint`.")
    return r"docs/ARCHITECTURE.md:\d+: `TOTPKeeper.mismatchFingerprint`: TOTPKeeper declares no member"


def case_type_gone(root):
    append(root, "The check is `TrustedFileChecker`.")
    return r"docs/ARCHITECTURE.md:\d+: `TrustedFileChecker`: no source declares the type"


def case_file_renamed(root):
    append(root, "See `Relays.swift` and `scripts/pg-clusters.sh`.")
    return r"docs/ARCHITECTURE.md:\d+: `(Relays.swift`: no source file|scripts/pg-clusters.sh`: .* does not exist)"


def case_function_gone(root):
    append(root, "The database checks `keyway_is_spent(record)`.")
    return r"docs/ARCHITECTURE.md:\d+: `keyway_is_spent\(record\)`: no source mentions keyway_is_spent"


def case_nested_type_gone(root):
    append(root, "A wake is a `Prompt.Wakez`.")
    return r"docs/ARCHITECTURE.md:\d+: `Prompt.Wakez`: Prompt declares no member Wakez"


def case_type_renamed_in_code(root):
    path = os.path.join(root, "Sources", "KeywayPlatform", "MonotonicClock.swift")
    with open(path, encoding="utf-8") as file:
        text = file.read()
    with open(path, "w", encoding="utf-8") as file:
        file.write(text.replace("MonotonicClock", "SteadyClock"))
    return r"docs/ARCHITECTURE.md:\d+: `MonotonicClock`: no source declares the type"


SELF_TEST_CASES = [
    ("(a) a member that moved to another type", case_member_moved),
    ("(b) a type no source declares", case_type_gone),
    ("(c) a file or path that is not there", case_file_renamed),
    ("(d) a C or SQL function no source has", case_function_gone),
    ("(e) a type renamed in the code but not in the document", case_type_renamed_in_code),
    ("(f) a nested type its type does not declare", case_nested_type_gone),
]


def self_test(root):
    here = os.path.abspath(__file__)
    failed = 0
    with tempfile.TemporaryDirectory() as scratch:
        base = os.path.join(scratch, "tree")
        keep = SOURCE_FOLDERS + PATH_ROOTS + ["README.md", "Package.swift"]
        os.makedirs(base)
        for name in keep:
            source = os.path.join(root, name)
            if os.path.isdir(source):
                shutil.copytree(source, os.path.join(base, name), dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns(".build", "build", "*.png", "*.svg"))
            elif os.path.exists(source):
                shutil.copy(source, os.path.join(base, name))
        baseline = subprocess.run([sys.executable, here, "check", base], capture_output=True, text=True)
        if baseline.returncode != 0:
            print(baseline.stderr, file=sys.stderr, end="")
            print("doc-names self-test: FAILED: the copy of the tree should pass", file=sys.stderr)
            return 1
        for number, (title, case) in enumerate(SELF_TEST_CASES):
            copy = os.path.join(scratch, f"case{number}")
            shutil.copytree(base, copy)
            expected = case(copy)
            result = subprocess.run([sys.executable, here, "check", copy], capture_output=True, text=True)
            found = [line for line in result.stderr.splitlines() if re.match(expected, line)]
            if result.returncode == 0 or not found:
                failed += 1
                print(result.stdout + result.stderr, file=sys.stderr, end="")
                print(f"doc-names self-test: FAILED: {title}: expected `check` to fail with /{expected}/",
                      file=sys.stderr)
                continue
            print(f"doc-names self-test: {title} fails the check: {found[0]}", flush=True)
            shutil.rmtree(copy)
    if failed:
        print(f"doc-names self-test: {failed} failure(s)", file=sys.stderr)
        return 1
    return 0


def main(argv):
    commands = {"check": check, "self-test": self_test}
    if len(argv) < 2 or argv[1] not in commands:
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[2] if len(argv) > 2 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return commands[argv[1]](root)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
