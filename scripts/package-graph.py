#!/usr/bin/env python3
"""Package.swift as the one source of truth for the build graph (docs/ARCHITECTURE.md §2).

    scripts/package-graph.py check [ROOT]      the import graph, its layers and the map in docs/ARCHITECTURE.md
                                                 against Package.swift (make lint)
    scripts/package-graph.py self-test [ROOT]  shows `check` passing on a copy of the tree, then failing on each kind
                                                 of mistake it exists for, naming it
    scripts/package-graph.py doc [ROOT]        prints the map: a table of the targets and their imports, lowest layer
                                                 first, and the layers as a diagram, from the top down
    scripts/package-graph.py update-doc [ROOT] writes that map into docs/ARCHITECTURE.md between the lines
                                                 <!-- BEGIN scripts/package-graph.py doc --> and
                                                 <!-- END scripts/package-graph.py doc -->
    scripts/package-graph.py build-plan TARGET   for scripts/build-module.sh, from one read of the manifest: the
                                                 swiftc flags TARGET's settings give, on the first line, then
                                                 NAME:DIRECTORY of TARGET and everything below it, in build order

`check` reads the manifest with `swift package dump-package` and each target's sources for `import` lines, and fails,
naming the file and line, on:

- a module a target imports but does not declare (it builds today only because something else pulled it in), or
  declares but never imports (an arrow in the graph the code does not have);
- an import that breaks the layers (BACKENDS, SERVER_SIDE and CLIENT_COMPOSITION below are the tables): a plugin (a
  target under Plugins/) imports only the core, the platform, C libraries and its own folder; only KeywayFactors, the
  factor list, imports a factor plugin (the command line only the factors' own tools it shows, PERSON_TOOLS); only keywayd, which runs them, imports a device backend; keywayd's side never
  imports the clients' composition. Tests, and the programs under Tests/, may import anything they declare;
- a declared import the target uses nothing of: none of the public names the imported module's sources declare (a C
  library's: the prefixes in C_PREFIXES) occurs as a word in the importing target's sources;
- a map in docs/ARCHITECTURE.md (between the markers above) that is not what `doc` prints.

The toolchain's own modules (Glibc, Foundation, Testing, ...) are not targets and are not checked.
"""
import difflib
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

# The layers. A plugin is a target under Plugins/; its folder is the first two components of its path.
# and C libraries, and its own folder. KeywayDBus is the platform's D-Bus client (a C library's one caller).
PLUGIN_MAY_IMPORT = {"KeywayCore", "KeywayPlatform", "CKeywayLibc", "KeywayDBus"}
FACTOR_LIST = "KeywayFactors"  # the one importer of the factor plugins
# Device backends: plugins the program that runs the device composes, not the factor list.
BACKENDS = {"KeywayFprintd", "KeywayFIDO2Key"}
BACKEND_RUNNER = "keywayd"
# keywayd's side never imports the clients' composition (the list of factors is below both).
SERVER_SIDE = {"keywayd", "KeywayDaemon", "KeywayVault", "KeywayStore", "KeywayCrypto"}
CLIENT_COMPOSITION = {"KeywayRuntime", "PAMKeyway", "KeywayTools"}
# The command line shows a few factors' own tools to a person (the pattern drawn on a terminal grid, the simulated
# sensor's controls, its error curves): these, and only these, import the plugins named beside them. Nothing the PAM
# module or keywayd links is here.
PERSON_TOOLS = {
    "keyway": {"KeywayGesture", "KeywayBiometric", "KeywayBiometricSimulator"},
    "KeywayTools": {"KeywayGesture", "KeywayBiometricSimulator"},
    # The lock screen draws the pattern's grid (the gesture factor's drawing model) and reads its show-trail switch.
    "keyway-lock": {"KeywayGesture", "KeywayGestureDrawing"},
}

# What a target's sources say when they use a C library: its names start with one of these. CKeywayLibc re-exports
# the C library, whose names have no prefix, so it is not checked.
C_PREFIXES = {
    "CSQLite": ("sqlite3_", "SQLITE_"),
    "CPostgres": ("PQ", "PG", "pg_", "CONNECTION_", "PGRES_"),
    "CDBus": ("dbus_", "DBUS_", "DBus"),
    "CFido2": ("fido_", "FIDO_", "es256_", "eddsa_", "rs256_"),
    "CSodium": ("sodium", "crypto_", "randombytes"),
    "CQREncode": ("QRcode", "QR_"),
    "CPAM": ("pam_", "PAM_"),
    "CX11Cairo": ("XOpenDisplay", "XGrab", "cairo_"),
}
C_UNCHECKED = {"CKeywayLibc"}

BEGIN_MAP = "<!-- BEGIN scripts/package-graph.py doc -->"
END_MAP = "<!-- END scripts/package-graph.py doc -->"
MAP_FILE = os.path.join("docs", "ARCHITECTURE.md")
DIAGRAM_WIDTH = 118


def manifest(root):
    swiftc = os.environ.get("SWIFTC")
    swift = os.path.join(os.path.dirname(swiftc), "swift") if swiftc else shutil.which("swift")
    swift = swift or "/opt/swift/usr/bin/swift"
    # A scratch directory of its own, not the tree's .build: a `swift build` running there holds .build's lock for
    # minutes. One per user, kept (SwiftPM leaves a lock file in /tmp named after it).
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    scratch = os.path.join(cache, "keyway-package-graph")
    done = subprocess.run([swift, "package", "--package-path", root, "--scratch-path", scratch, "dump-package"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise ManifestError(f"`swift package dump-package` failed on {os.path.join(root, 'Package.swift')}:\n"
                            + done.stderr.strip())
    return json.loads(done.stdout)


class ManifestError(Exception):
    """Package.swift could not be read."""


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


def source_files(root, target, extensions=(".swift",)):
    """The target's files, in a fixed order: each directory's own files by name, then its subdirectories by name."""
    directory = os.path.join(root, target_path(target))
    for base, directories, files in os.walk(directory):
        directories.sort()
        for file in sorted(files):
            if file.endswith(extensions):
                yield os.path.join(base, file)


class Sources:
    """One read of a target's Swift sources: what it imports (module -> first FILE:LINE, and whether any import of it
    is @testable), and every word outside the import lines."""

    def __init__(self, root, target):
        self.imports, self.testable, self.words = {}, set(), set()
        for path in source_files(root, target):
            with open(path, encoding="utf-8") as source:
                quoted = False  # inside a multi-line string literal (a script the tests write), not Swift
                for number, line in enumerate(source, 1):
                    match = None if quoted else IMPORT.match(line)
                    if line.count('"""') % 2:
                        quoted = not quoted
                    if match:
                        module = match.group(1)
                        self.imports.setdefault(module, f"{os.path.relpath(path, root)}:{number}")
                        if "@testable" in match.group(0):
                            self.testable.add(module)
                    else:
                        self.words.update(WORD.findall(line))


WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MODIFIER = (r"(?:static|class|final|nonisolated|mutating|nonmutating|override|convenience|required|indirect|lazy|"
             r"dynamic|weak|unowned|consuming|borrowing|distributed|optional|prefix|postfix|infix|"
             r"(?:private|fileprivate|internal|package|public)\s*\(\s*set\s*\)|@\w+(?:\([^)]*\))?)")
_KEYWORD = (r"(func|var|let|struct|class|enum|protocol|typealias|actor|case|init|subscript|extension|associatedtype|"
            r"macro)")
_NAME = r"`?([A-Za-z_][A-Za-z0-9_]*)?"
# A declaration another module sees: `public`, `open` or `package`, maybe other modifiers and attributes, a keyword.
PUBLIC_DECLARATION = re.compile(rf"(?<![\w.])(public|open|package)(?:\s+{_MODIFIER})*\s+{_KEYWORD}\b\s*{_NAME}")
# Any declaration, whatever its access: what `@testable import` may use, and the members of a public protocol or of a
# public extension.
ANY_DECLARATION = re.compile(rf"(?<![\w.])(?:func|var|let|struct|class|enum|protocol|typealias|actor|associatedtype)"
                             rf"\s+{_NAME}")
NOT_A_CASE = {"let", "var", "is", "default", "where", "_"}


def case_names(text):
    """The names an enum `case` line declares: `case a, b(Int), c = 3` gives a, b and c."""
    text = re.sub(r"^\s*(?:indirect\s+)?case\b", "", text)
    while True:  # drop associated values and raw values' calls, innermost parentheses first
        shorter = re.sub(r"\([^()]*\)", "", text)
        if shorter == text:
            break
        text = shorter
    names = []
    for part in text.split(","):
        match = re.match(r"\s*`?([A-Za-z_][A-Za-z0-9_]*)", part)
        if match and match.group(1) not in NOT_A_CASE:
            names.append(match.group(1))
    return names


def swift_names(paths, everything):
    """The names a module's Swift sources let another module use: what is declared `public`, `open` or `package`, the
    cases of a public enum, the requirements of a public protocol, the members of a public extension. With
    `everything` (a @testable import), every declared name. Generous on purpose: a name too many makes an import look
    used, a name too few would call a used import unused."""
    names, types = set(), set()
    for path in paths:
        with open(path, encoding="utf-8") as source:
            lines = source.read().split("\n")
        open_bodies = []  # (indentation, kind) of the public enums, protocols and extensions around this line
        for line in lines:
            stripped = line.strip()
            if not stripped:
                continue
            indentation = len(line) - len(line.lstrip(" "))
            # a body is the lines indented deeper than its declaration (swift-format's layout); a `{` alone on a
            # line of its own, after a declaration that wraps, opens it
            open_bodies = [(depth, kind) for depth, kind in open_bodies
                           if indentation > depth or indentation == depth and stripped.startswith("{")]
            kinds = {kind for _, kind in open_bodies}
            if kinds & {"enum", "extension"} and re.match(r"(?:indirect\s+)?case\b", stripped):
                names.update(case_names(stripped))
            if kinds & {"protocol", "extension"} and not re.search(r"\b(?:private|fileprivate)\b", stripped):
                names.update(name for name in ANY_DECLARATION.findall(stripped) if name)
            if everything:
                names.update(name for name in ANY_DECLARATION.findall(stripped) if name)
                if stripped.startswith("case "):
                    names.update(case_names(stripped))
            for match in PUBLIC_DECLARATION.finditer(stripped):
                keyword, name = match.group(2), match.group(3)
                if keyword not in ("init", "subscript", "extension") and name:
                    names.add(name)
                    if keyword in ("struct", "class", "enum", "protocol", "actor", "typealias"):
                        types.add(name)
                if keyword in ("enum", "protocol", "extension"):
                    if "{" in stripped and stripped.count("{") <= stripped.count("}"):
                        # a body on one line: `public enum Mode { case a, b }`
                        for case in re.findall(r"\bcase\b[^;}]*", stripped[stripped.index("{") + 1:]):
                            names.update(case_names(case))
                    else:
                        open_bodies.append((indentation, keyword))
    return names, types


C_DECLARATION = re.compile(r"#\s*define\s+(\w+)|\b(\w+)\s*\(|\btypedef\b[^;]*?\b(\w+)\s*;|"
                           r"\b(?:struct|enum|union)\s+(\w+)")
C_KEYWORDS = {"if", "while", "for", "switch", "return", "sizeof", "defined", "int", "char", "void", "const",
              "unsigned", "signed", "long", "short", "struct", "enum", "union", "static", "inline", "extern"}


def c_names(paths):
    """The names a C target's headers declare: functions, macros, typedefs, tags."""
    names = set()
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as source:
            text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", source.read(), flags=re.S)
        for groups in C_DECLARATION.findall(text):
            names.update(name for name in groups if name and name not in C_KEYWORDS)
    return names


class Graph:
    """The manifest and, read once each and on demand, the targets' sources and the names they declare."""

    def __init__(self, root, package=None):
        self.root = root
        self.package = package or manifest(root)
        self.targets = {t["name"]: t for t in self.package["targets"]}
        self.by_module = {module_name(name): target for name, target in self.targets.items()}
        self._sources, self._names = {}, {}

    def sources(self, name):
        if name not in self._sources:
            self._sources[name] = Sources(self.root, self.targets[name])
        return self._sources[name]

    def names(self, name, everything=False):
        """(names, type names) another module may use of target `name`; every declared name with `everything`."""
        key = (name, everything)
        if key not in self._names:
            target = self.targets[name]
            swift = list(source_files(self.root, target))
            if swift:
                self._names[key] = swift_names(swift, everything)
            else:
                self._names[key] = (c_names(source_files(self.root, target, (".h",))), set())
        return self._names[key]

    def is_plugin(self, name):
        target = self.targets.get(name)
        return (target is not None and target["type"] != "system"
                and target_path(target).replace(os.sep, "/").startswith("Plugins/"))

    def folder(self, name):
        return "/".join(target_path(self.targets[name]).replace(os.sep, "/").split("/")[:2])

    def is_test_side(self, name):
        """Tests, and the programs and helpers under Tests/: they may import anything they declare."""
        target = self.targets[name]
        return target["type"] == "test" or target_path(target).replace(os.sep, "/").startswith("Tests/")

    def is_system(self, name):
        return self.targets.get(name, {}).get("type") == "system"

    def dependencies(self, name):
        return [d for d in dependency_names(self.targets[name]) if d in self.targets]

    def layers(self):
        """Each target's layer: 0 with no dependency among the targets, else one above its highest dependency."""
        layer = {}

        def visit(name, path=()):
            if name not in layer:
                if name in path:
                    raise SystemExit(f"package-graph: a dependency cycle through {' -> '.join(path + (name,))}")
                layer[name] = 1 + max((visit(d, path + (name,)) for d in self.dependencies(name)), default=-1)
            return layer[name]

        for name in self.targets:
            visit(name)
        return layer


def check_declarations(graph, problems):
    """Every import declared, every declaration imported."""
    for target in graph.package["targets"]:
        if target["type"] == "system":
            continue
        used = graph.sources(target["name"]).imports
        declared = dependency_names(target)
        for module, place in sorted(used.items()):
            if module in TOOLCHAIN_MODULES or module == target["name"]:
                continue
            if module not in declared and module not in {module_name(d) for d in declared}:
                problems.append(f"{place}: {target['name']} imports {module}, which Package.swift does not declare "
                                f"as its dependency")
        for dependency in declared:
            kind = graph.targets.get(dependency, {}).get("type")
            if kind == "executable":
                continue  # a test's dependency on a program builds it; nothing imports it
            if dependency not in used:
                problems.append(f"Package.swift: {target['name']} declares {dependency} but no file under "
                                f"{target_path(target)} imports it")


def check_tables(graph, problems):
    """The layers' tables name targets that exist (a renamed target must not switch a rule off silently), and every
    C library has its prefixes."""
    tables = {"PLUGIN_MAY_IMPORT": PLUGIN_MAY_IMPORT, "FACTOR_LIST": {FACTOR_LIST}, "BACKENDS": BACKENDS,
              "BACKEND_RUNNER": {BACKEND_RUNNER}, "SERVER_SIDE": SERVER_SIDE, "CLIENT_COMPOSITION": CLIENT_COMPOSITION,
              "PERSON_TOOLS": set(PERSON_TOOLS).union(*PERSON_TOOLS.values())}
    for table, names in tables.items():
        for name in sorted(names - set(graph.targets)):
            problems.append(f"scripts/package-graph.py: {table} names {name}, which Package.swift does not declare")
    for name in sorted(graph.targets):
        if graph.is_system(name) and name not in C_PREFIXES and name not in C_UNCHECKED:
            problems.append(f"scripts/package-graph.py: the C library {name} has no entry in C_PREFIXES (the "
                            f"prefixes of its names, to see that an importer uses it)")


def check_layers(graph, problems):
    for name, target in graph.targets.items():
        if target["type"] == "system" or graph.is_test_side(name):
            continue
        for module, place in sorted(graph.sources(name).imports.items()):
            other = graph.by_module.get(module, {}).get("name")
            if other is None or other == name:
                continue
            if graph.is_plugin(name):
                if not (other in PLUGIN_MAY_IMPORT or graph.is_system(other)
                        or graph.is_plugin(other) and graph.folder(other) == graph.folder(name)):
                    problems.append(f"{place}: plugin {name} imports {other} (a plugin imports only the core, the "
                                    f"platform, C libraries and its own folder)")
                continue
            if graph.is_plugin(other):
                if other in BACKENDS:
                    if name != BACKEND_RUNNER:
                        problems.append(f"{place}: {name} imports the device backend {other}; only {BACKEND_RUNNER} "
                                        f"(the program that runs the device) and its own plugin folder import it")
                elif name != FACTOR_LIST and other not in PERSON_TOOLS.get(name, set()):
                    problems.append(f"{place}: {name} imports the plugin {other}; only {FACTOR_LIST} (the factor "
                                    f"list) imports plugins (and the command line the tools in PERSON_TOOLS)")
            if name in SERVER_SIDE and other in CLIENT_COMPOSITION:
                problems.append(f"{place}: {name} imports {other}, so keywayd's side imports the clients' "
                                f"composition")


def check_use(graph, problems):
    """Each declared import is used: the importer's sources name something the imported module declares."""
    for name, target in graph.targets.items():
        if target["type"] == "system":
            continue
        sources = graph.sources(name)
        declared = {module_name(d) for d in dependency_names(target)}
        for module, place in sorted(sources.imports.items()):
            other = graph.by_module.get(module, {}).get("name")
            if other is None or other == name or module not in declared or other in C_UNCHECKED:
                continue
            if graph.is_system(other):
                prefixes = C_PREFIXES.get(other)
                if prefixes is None or any(word.startswith(prefixes) for word in sources.words):
                    continue
            else:
                names, _ = graph.names(other, everything=module in sources.testable)
                if names & sources.words:
                    continue
            problems.append(f"{place}: {name} imports {other} but uses none of its public names")


def doc(graph):
    """The map: every target but the tests' and the C libraries, lowest layer first, with what it imports; then the
    layers as a diagram, from the top down."""
    layer = graph.layers()
    shown = sorted((name for name, target in graph.targets.items()
                    if target["type"] != "system" and not graph.is_test_side(name)),
                   key=lambda name: (layer[name], name.lower(), name))

    def by_name(names):
        return sorted(names, key=lambda name: (name.lower(), name))

    lines = ["| target | path | imports |", "|---|---|---|"]
    for name in shown:
        imports = by_name(dependency_names(graph.targets[name]))
        lines.append(f"| {name} | {target_path(graph.targets[name])} | {', '.join(imports) or '—'} |")

    below = {}  # everything each target reaches

    def reach(name):
        if name not in below:
            below[name] = set()
            for dependency in graph.dependencies(name):
                below[name] |= {dependency} | reach(dependency)
        return below[name]

    lines += ["", "Who imports whom, layer by layer from the top down (`A ─► B`: A imports B; an arrow that a "
              "longer path", "already covers is left out, the table lists every import):", "", "```text"]
    label_width = len(f"layer {max((layer[name] for name in shown), default=0)}")
    for level in sorted({layer[name] for name in shown}, reverse=True):
        here = [name for name in shown if layer[name] == level]
        name_width = max(len(name) for name in here)
        for index, name in enumerate(by_name(here)):
            dependencies = dependency_names(graph.targets[name])
            direct = [d for d in dependencies
                      if not any(d in reach(e) for e in dependencies if e != d and e in graph.targets)]
            direct.sort(key=lambda d: (-layer.get(d, 0), d.lower(), d))
            label = (f"layer {level}" if index == 0 else "").ljust(label_width)
            head = f"{label}  {name.ljust(name_width)}"
            if not direct:
                lines.append(head.rstrip())
                continue
            head += " ─► "
            row = head
            for position, dependency in enumerate(direct):
                word = dependency + ("," if position < len(direct) - 1 else "")
                if row != head and len(row) + 1 + len(word) > DIAGRAM_WIDTH:
                    lines.append(row.rstrip())
                    row = " " * len(head)
                row += ("" if row.endswith(" ") else " ") + word
            lines.append(row.rstrip())
    lines.append("```")
    return lines


def read_map(root):
    """(lines of docs/ARCHITECTURE.md, index of the BEGIN marker, index of the END marker); markers None if absent."""
    path = os.path.join(root, MAP_FILE)
    if not os.path.exists(path):
        return None, None, None
    with open(path, encoding="utf-8") as file:
        lines = file.read().split("\n")
    begin = next((i for i, line in enumerate(lines) if line.strip() == BEGIN_MAP), None)
    end = next((i for i, line in enumerate(lines) if line.strip() == END_MAP and begin is not None and i > begin),
               None)
    return lines, begin, end


def trim(lines):
    lines = list(lines)
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def check_map(graph, problems):
    expected = doc(graph)
    lines, begin, end = read_map(graph.root)
    advice = "the map differs from Package.swift; run scripts/package-graph.py doc and paste it between the markers"
    if lines is None or begin is None or end is None:
        problems.append(f"{MAP_FILE}:1: {advice}\n    (it has no line `{BEGIN_MAP}` followed by a line `{END_MAP}`; "
                        f"scripts/package-graph.py update-doc fills them in once they are there)")
        return
    inside = lines[begin + 1:end]
    first = next((i for i, line in enumerate(inside) if line.strip()), len(inside))
    found = trim(inside)
    if found == expected:
        return
    if not found:
        problems.append(f"{MAP_FILE}:{end + 1}: {advice}\n    (there is nothing between them yet; "
                        f"scripts/package-graph.py update-doc writes it there)")
        return
    differs = next((i for i, (a, b) in enumerate(zip(found, expected)) if a != b), min(len(found), len(expected)))
    number = begin + 2 + first + differs  # 1-based line of the first line that differs
    diff = list(difflib.unified_diff(found, expected, f"{MAP_FILE} (between the markers)",
                                     "scripts/package-graph.py doc", n=1, lineterm=""))
    shown = diff[:24] + ([f"... ({len(diff) - 24} more lines)"] if len(diff) > 24 else [])
    problems.append(f"{MAP_FILE}:{number}: {advice}\n" + "\n".join("    " + line for line in shown))


def check(root):
    graph = Graph(root)
    problems = []
    check_declarations(graph, problems)
    check_tables(graph, problems)
    check_layers(graph, problems)
    check_use(graph, problems)
    check_map(graph, problems)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"package-graph: {len(problems)} problem(s) between Package.swift, the imports, the layers and "
              f"{MAP_FILE}", file=sys.stderr)
        return 1
    print(f"package-graph: the imports of {len(graph.targets)} targets are what Package.swift declares, keep to the "
          f"layers, are each used, and {MAP_FILE} shows them")
    return 0


def print_doc(root):
    print("\n".join(doc(Graph(root))))
    return 0


def update_doc(root):
    graph = Graph(root)
    lines, begin, end = read_map(root)
    if lines is None or begin is None or end is None:
        print(f"package-graph: {MAP_FILE} has no line `{BEGIN_MAP}` followed by a line `{END_MAP}`: put the two "
              f"where the map goes, then run this again", file=sys.stderr)
        return 1
    block = [""] + doc(graph) + [""]
    updated = lines[:begin + 1] + block + lines[end:]
    if updated == lines:
        print(f"package-graph: the map in {MAP_FILE} is current")
        return 0
    path = os.path.join(root, MAP_FILE)
    with open(path + ".new", "w", encoding="utf-8") as file:
        file.write("\n".join(updated))
    shutil.copymode(path, path + ".new")
    os.replace(path + ".new", path)
    print(f"package-graph: wrote the map into {MAP_FILE}, between its lines {begin + 1} and {begin + len(block) + 2}")
    return 0


# The self-test: `check` on copies of the tree.

class SetupError(Exception):
    """The self-test could not make its edit on the copy (the tree changed shape): says what it looked for."""


def run(command, root):
    return subprocess.run([sys.executable, os.path.abspath(__file__), command, root], capture_output=True, text=True)


def problem_lines(output):
    """The problems `check` printed, without their line numbers (an edit shifts the lines below it)."""
    return {re.sub(r"^([^\s:]+):\d+: ", r"\1: ", line) for line in output.splitlines()
            if line and not line[0].isspace() and not line.startswith("package-graph:")}


def edit(root, relative, change):
    path = os.path.join(root, relative)
    with open(path, encoding="utf-8") as file:
        text = file.read()
    changed = change(text)
    if changed is None or changed == text:
        raise SetupError(f"could not edit {relative}")
    with open(path, "w", encoding="utf-8") as file:
        file.write(changed)


def need(graph, *names):
    for name in names:
        if name not in graph.targets:
            raise SetupError(f"Package.swift has no target {name}")


def add_dependency(root, graph, name, dependency):
    """Adds `dependency` to `name`'s list in the copy's Package.swift (library("NAME", [ or name: "NAME", ... [)."""
    need(graph, name)
    if dependency in dependency_names(graph.targets[name]):
        return

    def change(text):
        pattern = (rf'(library\(\s*"{re.escape(name)}",\s*\[|name:\s*"{re.escape(name)}",\s*dependencies:\s*\[|'
                   rf'tests\(\s*"{re.escape(name)}",\s*\[)')
        if not re.search(pattern, text):
            raise SetupError(f'found neither `library("{name}", [` nor `name: "{name}", dependencies: [` in '
                             f"Package.swift, to declare {dependency}")
        return re.sub(pattern, lambda m: f'{m.group(1)}"{dependency}", ', text, count=1)

    edit(root, "Package.swift", change)


def first_file(root, graph, name):
    need(graph, name)
    path = next(source_files(root, graph.targets[name]), None)
    if path is None:
        raise SetupError(f"{name} has no Swift file to edit")
    return os.path.relpath(path, root)


def add_import(root, graph, name, module, use=None):
    """`import MODULE` as line 1 of NAME's first file (so that it is the import `check` names), and a line that uses
    `use`, a name MODULE declares. Returns that file."""
    relative = first_file(root, graph, name)
    tail = f"\nprivate typealias PackageGraphSelfTest = {use}\n" if use else ""
    edit(root, relative, lambda text: f"import {module}\n{text}{tail}")
    return relative


def a_type_of(graph, name):
    need(graph, name)
    types = sorted(graph.names(name)[1])
    if not types:
        raise SetupError(f"{name} declares no public type to use")
    return types[0]


def case_stale_map(copy):
    lines, begin, end = read_map(copy)
    row = next((i for i in range(begin + 1, end) if lines[i].startswith("| ") and "---" not in lines[i]
                and not lines[i].startswith("| target |")), None)
    if row is None:
        raise SetupError(f"no table row between the markers in {MAP_FILE}")
    edit(copy, MAP_FILE, lambda text: "\n".join(lines[:row] + [lines[row].replace(" |", " | KeywayStale,", 1)]
                                                + lines[row + 1:]))
    return rf"{re.escape(MAP_FILE)}:{row + 1}: the map differs from Package.swift; run scripts/package-graph.py doc"


def case_plugin_imports_plugin(copy):
    graph = Graph(copy)
    importer, imported = "KeywayPasscode", "KeywayGesture"
    add_dependency(copy, graph, importer, imported)
    path = add_import(copy, graph, importer, imported, a_type_of(graph, imported))
    return (rf"{re.escape(path)}:1: plugin {importer} imports {imported} \(a plugin imports only the core, the "
            rf"platform, C libraries and its own folder\)$")


def case_server_imports_client(copy):
    graph = Graph(copy)
    importer, imported = "keywayd", "KeywayRuntime"
    add_dependency(copy, graph, importer, imported)
    path = add_import(copy, graph, importer, imported, a_type_of(graph, imported))
    return rf"{re.escape(path)}:1: {importer} imports {imported}, so keywayd's side imports the clients' composition$"


def case_unused_import(copy):
    """A declared import the layers allow and that names nothing: KeywayConfig importing a library with one type it
    never mentions, added to the copy for the purpose (a real module's names are too many and too plain, `name`,
    `path`, for a pair that shares none to be sure to exist)."""
    importer, imported = "KeywayConfig", "KeywaySelfTestUnused"
    need(Graph(copy), importer)

    def declare(text):
        pattern = re.compile(r"^(\s*targets:\s*\[)[ \t]*$", re.M)  # the package's list, not a product's
        if not pattern.search(text):
            raise SetupError("found no line `targets: [` in Package.swift")
        return pattern.sub(lambda m: f'{m.group(1)}\n        library("{imported}"),', text, count=1)

    edit(copy, "Package.swift", declare)
    os.makedirs(os.path.join(copy, "Sources", imported))
    with open(os.path.join(copy, "Sources", imported, "Unused.swift"), "w", encoding="utf-8") as file:
        file.write("/// What nothing uses.\npublic struct PackageGraphSelfTestUnused {}\n")
    graph = Graph(copy)
    add_dependency(copy, graph, importer, imported)
    path = add_import(copy, graph, importer, imported)
    return rf"{re.escape(path)}:1: {importer} imports {imported} but uses none of its public names$"


def case_undeclared_import(copy):
    graph = Graph(copy)
    path = add_import(copy, graph, "KeywayCore", "KeywayStore")  # the core reaching up to the store
    return rf"{re.escape(path)}:1: KeywayCore imports KeywayStore, which Package.swift does not declare"


SELF_TEST_CASES = [
    ("(a) a stale map in docs/ARCHITECTURE.md", case_stale_map),
    ("(b) a plugin importing another plugin", case_plugin_imports_plugin),
    ("(c) keywayd importing the clients' composition", case_server_imports_client),
    ("(d) a declared import that uses nothing", case_unused_import),
    ("(e) an import Package.swift does not declare", case_undeclared_import),
]


def self_test(root):
    """`check` on a copy of the tree with its map brought up to date: passing as it is, then failing on each case,
    each on a fresh copy, with the message expected and no other new one."""
    ignore = shutil.ignore_patterns(".build", ".git", "build")
    failed = 0
    with tempfile.TemporaryDirectory() as scratch:
        base = os.path.join(scratch, "tree")
        shutil.copytree(root, base, ignore=ignore)
        lines, begin, end = read_map(base)
        if lines is not None and (begin is None or end is None):
            with open(os.path.join(base, MAP_FILE), "a", encoding="utf-8") as file:
                file.write(f"\n{BEGIN_MAP}\n{END_MAP}\n")
        updated = run("update-doc", base)
        if updated.returncode != 0:
            print(updated.stdout + updated.stderr, file=sys.stderr, end="")
            print("package-graph self-test: update-doc failed on the copy of the tree", file=sys.stderr)
            return 1
        baseline = run("check", base)
        if baseline.returncode != 0:
            failed += 1
            print(baseline.stderr, file=sys.stderr, end="")
            print("package-graph self-test: FAILED: the copy of the tree, its map brought up to date, should pass but "
                  "fails for the reasons above (the tree's own problems, not the self-test's). The cases below are "
                  "still run; each must add its own problem and no other.", file=sys.stderr)
        known = problem_lines(baseline.stderr)
        for number, (title, case) in enumerate(SELF_TEST_CASES):
            copy = os.path.join(scratch, f"case{number}")
            shutil.copytree(base, copy)
            try:
                expected = case(copy)
                if case is not case_stale_map:
                    updated = run("update-doc", copy)  # the edit's new arrow, in the map, so only the rule fires
                    if updated.returncode != 0:
                        raise SetupError("update-doc failed on the copy: " + updated.stderr.strip())
            except (SetupError, ManifestError) as error:
                failed += 1
                print(f"package-graph self-test: FAILED: {title}: {error}", file=sys.stderr)
                continue
            result = run("check", copy)
            found = [line for line in result.stderr.splitlines() if re.match(expected, line)]
            expected_lines = problem_lines("\n".join(found))
            others = sorted(problem_lines(result.stderr) - known - expected_lines)
            if result.returncode == 0 or not found or others:
                failed += 1
                print(result.stdout + result.stderr, file=sys.stderr, end="")
                print(f"package-graph self-test: FAILED: {title}: expected `check` to fail with /{expected}/"
                      + (" and no other new problem, not: " + "; ".join(others) if others else ""), file=sys.stderr)
                continue
            print(f"package-graph self-test: {title} fails the check: {found[0]}", flush=True)
            shutil.rmtree(copy)
    if failed:
        print(f"package-graph self-test: {failed} failure(s)", file=sys.stderr)
        return 1
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
    commands = {"check": check, "self-test": self_test, "doc": print_doc, "update-doc": update_doc}
    if len(argv) < 2 or argv[1] not in list(commands) + ["build-plan"]:
        print(__doc__, file=sys.stderr)
        return 2
    command = argv[1]
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        if command in commands:
            root = argv[2] if len(argv) > 2 else here
            return commands[command](root)
        if len(argv) < 3:
            print(__doc__, file=sys.stderr)
            return 2
        return build_plan(here, argv[2])
    except ManifestError as error:
        print(f"package-graph: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
