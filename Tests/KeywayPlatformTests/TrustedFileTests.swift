import Glibc
import KeywayPlatform
import Testing

/// The one owner-and-mode check, on real files in a private directory: what it trusts, what it refuses and the words
/// it refuses with. The tests run as root (as the suite does), so another owner is made with chown.
@Suite("TrustedFile")
struct TrustedFileTests {
    /// A fresh 0700 directory, removed with everything in it at the end.
    private func withDirectory(_ body: (String) -> Void) {
        var template = Array("/tmp/keyway-trusted-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        let directory = String(cString: made!)
        defer { _ = system("rm -rf '\(directory)'") }
        body(directory)
    }

    /// What a check refused, or nil when it trusted.
    private func problem<T>(_ result: Result<T, TrustedFile.Problem>) -> TrustedFile.Problem? {
        if case .failure(let problem) = result { problem } else { nil }
    }

    private func write(_ path: String, _ text: String, mode: mode_t) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        _ = text.withCString { Glibc.write(fd, $0, strlen($0)) }
        close(fd)
        chmod(path, mode)
    }

    @Test("root's file, writable by no one else: read; missing: missing")
    func trustsRootsFile() {
        withDirectory { directory in
            write(directory + "/keyway.conf", "[gesture]\n", mode: 0o644)
            #expect(
                TrustedFile.rootOnly(.regularFile).read(directory + "/keyway.conf", limit: 100)
                    == .read(Array("[gesture]\n".utf8)))
            #expect(TrustedFile.rootOnly(.regularFile).read(directory + "/absent", limit: 100) == .missing)
        }
    }

    @Test("a file others may write, another user's, a link, a directory, a big one: each refused in words")
    func refusesEachProblem() {
        withDirectory { directory in
            let rule = TrustedFile.rootOnly(.regularFile)
            write(directory + "/open", "x", mode: 0o666)
            #expect(
                rule.read(directory + "/open", limit: 100) == .refused("it is writable by group and others (mode 0666)")
            )
            write(directory + "/group", "x", mode: 0o664)
            #expect(rule.read(directory + "/group", limit: 100) == .refused("it is writable by its group (mode 0664)"))
            write(directory + "/theirs", "x", mode: 0o644)
            chown(directory + "/theirs", 65534, 65534)
            #expect(rule.read(directory + "/theirs", limit: 100) == .refused("it is owned by uid 65534, not root"))
            symlink(directory + "/theirs", directory + "/link")
            #expect(rule.read(directory + "/link", limit: 100) == .refused("it is a symbolic link; use the real path"))
            mkdir(directory + "/sub", 0o755)
            #expect(rule.read(directory + "/sub", limit: 100) == .refused("it is not a regular file"))
            write(directory + "/big", String(repeating: "x", count: 200), mode: 0o644)
            #expect(rule.read(directory + "/big", limit: 100) == .refused("it is larger than 100 bytes"))
            let explained = rule.read(directory + "/open", limit: 100, explain: { "custom: \(rule.words($0))" })
            #expect(explained == .refused("custom: it is writable by group and others (mode 0666)"))
        }
    }

    @Test("private files refuse any access by others; links, sticky directories and owners as the rule says")
    func rulesAsConfigured() {
        withDirectory { directory in
            let secret = directory + "/passfile"
            write(secret, "x", mode: 0o640)
            let mine = TrustedFile.mine(.regularFile, privateToo: true)
            #expect(problem(mine.check(path: secret)) == .mode(0o640))
            #expect(mine.words(.mode(0o640)) == "it is accessible to its group (mode 0640)")
            chmod(secret, 0o600)
            #expect(problem(mine.check(path: secret)) == nil)
            if case .success(.some) = mine.check(path: directory + "/absent") {
                Issue.record("nothing there was found")
            }

            link(secret, directory + "/second")
            let single = TrustedFile(.regularFile, ownedBy: [0], forbidden: 0o077, singleLink: true)
            #expect(problem(single.check(path: secret)) == .links(2))

            let sticky = directory + "/sticky"
            mkdir(sticky, 0o777)
            chmod(sticky, 0o1777)
            let ancestors = TrustedFile(nil, ownedBy: [0, 1000], forbidden: 0o022, stickyExempt: true)
            #expect(problem(ancestors.check(path: sticky)) == nil)
            chmod(sticky, 0o777)
            #expect(problem(ancestors.check(path: sticky)) == .mode(0o777))
            chown(sticky, 1000, 1000)
            chmod(sticky, 0o755)
            #expect(problem(ancestors.check(path: sticky)) == nil)
            #expect(problem(TrustedFile.rootOnly(.directory).check(path: sticky)) == .owner(1000))
            #expect(TrustedFile.rootOnly(.directory).words(.owner(1000)) == "it is owned by uid 1000, not root")
            #expect(ancestors.ownerWords == "root or uid 1000")
        }
    }

    @Test("an open descriptor is judged by what it is, not by the name it was opened under")
    func judgesTheDescriptor() {
        withDirectory { directory in
            write(directory + "/file", "x", mode: 0o644)
            let fd = open(directory + "/file", O_RDONLY)
            defer { close(fd) }
            #expect(problem(TrustedFile.rootOnly(.regularFile).check(descriptor: fd)) == nil)
            chmod(directory + "/file", 0o646)  // changed after the open: the descriptor sees it
            #expect(problem(TrustedFile.rootOnly(.regularFile).check(descriptor: fd)) == .mode(0o646))
            #expect(problem(TrustedFile.rootOnly(.regularFile).check(descriptor: -1)) == .unexaminable(EBADF))
        }
    }
}
