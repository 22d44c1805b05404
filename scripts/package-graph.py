#!/usr/bin/env python3
"""Package.swift as the one source of truth for the build graph (docs/ARCHITECTURE.md §2).

    scripts/package-graph.py check             every target imports exactly the modules it declares (make lint)
    scripts/package-graph.py self-test         shows `check` failing on a copy of the tree with a wrong import
    scripts/package-graph.py build-plan TARGET   for scripts/build-module.sh, from one read of the manifest: the
                                                 swiftc flags TARGET's settings give, on the first line, then
                                                 NAME:DIRECTORY of TARGET and everything below it, in build order

`check` reads the manifest with `swift package dump-package` and each target's sources for `import` lines; a module
a target imports but does not declare (it builds today only because something else pulled it in), or declares but
never imports (an arrow in the graph the code does not have), is an error naming the target, the module and the
file. The toolchain's own modules (Glibc, Foundation, Testing, ...) are not targets and are not checked.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

TOOLCHAIN_MODULES = {
    "Glibc", "Foundation", "FoundationEssentials", "Dispatch", "Synchronization", "Testing", "XCTest", "Musl",
    "_Concurrency", "Swift",
}
IMPORT = re.compile(r"^\s*(?:@\w+\s+)*(?:(?:public|package|internal|fileprivate|private)\s+)?import\s+"
                    r"(?:(?:struct|class|enum|protocol|func|var|let|typealias)\s+)?([A-Za-z_][A-Za-z0-9_]*)")


def manifest(root):
    swiftc = os.environ.get("SWIFTC")
    swift = os.path.join(os.path.dirname(swiftc), "swift") if swiftc else shutil.which("swift")
    swift = swift or "/opt/swift/usr/bin/swift"
    out = subprocess.run([swift, "package", "--package-path", root, "dump-package"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def target_path(target):
    if target.get("path"):
        return target["path"]
    if target["type"] == "test":
        return os.path.join("Tests", target["name"])
    return os.path.join("Sources", target["name"])


def dependency_names(target):
    names = []
    for dependency in target["dependencies"]:
        for kind in ("byName", "target", "product"):
            if kind in dependency:
                names.append(dependency[kind][0])
    return names


def module_name(name):
    """An executable target is imported under its name with dashes as underscores; tests only depend on it."""
    return name.replace("-", "_")


def imports(root, target):
    found = {}
    directory = os.path.join(root, target_path(target))
    for base, _, files in os.walk(directory):
        for file in sorted(files):
            if not file.endswith(".swift"):
                continue
            path = os.path.join(base, file)
            with open(path, encoding="utf-8") as source:
                quoted = False  # inside a multi-line string literal (a script the tests write), not Swift
                for number, line in enumerate(source, 1):
                    match = None if quoted else IMPORT.match(line)
                    if line.count('"""') % 2:
                        quoted = not quoted
                    if match:
                        found.setdefault(match.group(1), f"{os.path.relpath(path, root)}:{number}")
    return found


def check(root):
    package = manifest(root)
    targets = {t["name"]: t for t in package["targets"]}
    problems = []
    for target in package["targets"]:
        if target["type"] == "system":
            continue
        used = imports(root, target)
        declared = dependency_names(target)
        for module, place in sorted(used.items()):
            if module in TOOLCHAIN_MODULES or module == target["name"]:
                continue
            if module not in declared and module not in {module_name(d) for d in declared}:
                problems.append(f"{place}: {target['name']} imports {module}, which Package.swift does not declare "
                                f"as its dependency")
        for dependency in declared:
            kind = targets.get(dependency, {}).get("type")
            if kind == "executable":
                continue  # a test's dependency on a program builds it; nothing imports it
            if dependency not in used:
                problems.append(f"Package.swift: {target['name']} declares {dependency} but no file under "
                                f"{target_path(target)} imports it")
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"package-graph: {len(problems)} difference(s) between Package.swift and the imports", file=sys.stderr)
        return 1
    print(f"package-graph: the imports of {len(targets)} targets are what Package.swift declares")
    return 0


def self_test(root):
    """`check` on a copy of the tree: passing as it is, then failing on one wrong import, naming it."""
    with tempfile.TemporaryDirectory() as scratch:
        copy = os.path.join(scratch, "tree")
        shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".build", ".git", "build"))
        passed = subprocess.run([sys.executable, __file__, "check", copy], capture_output=True, text=True)
        if passed.returncode != 0:
            print(passed.stderr, file=sys.stderr)
            print("package-graph self-test: the copy of the tree should pass", file=sys.stderr)
            return 1
        victim = os.path.join(copy, "Sources", "KeywayCore", "Vault.swift")
        with open(victim, encoding="utf-8") as source:
            text = source.read()
        with open(victim, "w", encoding="utf-8") as source:
            source.write("import KeywayStore\n" + text)  # the core reaching up to the store: the arrow we forbid
        failed = subprocess.run([sys.executable, __file__, "check", copy], capture_output=True, text=True)
        expected = "Sources/KeywayCore/Vault.swift:1: KeywayCore imports KeywayStore"
        if failed.returncode == 0 or expected not in failed.stderr:
            print(failed.stdout + failed.stderr, file=sys.stderr)
            print(f"package-graph self-test: expected a failure saying '{expected}'", file=sys.stderr)
            return 1
    print("package-graph self-test: a wrong import fails the check, naming file, line and module")
    return 0


def build_plan(root, name):
    """The swiftc flags of `name`'s settings, then NAME:DIRECTORY of the non-system targets it depends on,
    dependencies first, then `name` itself."""
    package = manifest(root)
    targets = {t["name"]: t for t in package["targets"]}
    flags = []
    for setting in targets[name].get("settings", []):
        kind = setting["kind"]
        if "enableUpcomingFeature" in kind:
            flags += ["-enable-upcoming-feature", kind["enableUpcomingFeature"]["_0"]]
    order, seen = [], set()

    def visit(current):
        if current in seen:
            return
        seen.add(current)
        for dependency in dependency_names(targets[current]):
            if dependency in targets:
                visit(dependency)
        if targets[current]["type"] != "system":
            order.append(f"{current}:{target_path(targets[current])}")

    visit(name)
    print(" ".join(flags))
    print("\n".join(order))
    return 0


def main(argv):
    if len(argv) < 2 or argv[1] not in ("check", "self-test", "build-plan"):
        print(__doc__, file=sys.stderr)
        return 2
    command = argv[1]
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if command in ("check", "self-test"):
        root = argv[2] if len(argv) > 2 else here
        return check(root) if command == "check" else self_test(root)
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    return build_plan(here, argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
