import CKeywayLibc
import KeywayPlatform

/// The soft key's socket, `DIR/key.sock` (mode 0666: any test user's process may connect), and its accept loop.
enum Listener {
    static let socketName = "key.sock"

    /// Why the key could not start listening.
    struct Failure: Error {
        var reason: String
    }

    /// Listens at `DIR/key.sock`, replacing a stale socket there (never a live one, nor any other kind of file).
    /// The socket is made under a temporary name and renamed into place once it listens, so a client that finds the
    /// path can connect.
    static func listen(in directory: KeyDirectory) throws(Failure) -> Int32 {
        let path = directory.path(of: socketName)
        var existing = stat()
        if lstat(path, &existing) == 0 {
            guard existing.st_mode & mode_t(S_IFMT) == mode_t(S_IFSOCK) else {
                throw Failure(reason: "\(path): a file that is not a socket is in the way")
            }
            if case .success(let live) = UnixSocket.connect(to: path) {
                close(live)
                throw Failure(reason: "\(path): another keyway-softkey listens there")
            }
        }
        let temporary = directory.path(of: ".\(socketName).\(getpid())")
        unlink(temporary)
        switch UnixSocket.listen(at: temporary, mode: 0o666) {
        case .failure(let failure): throw Failure(reason: failure.description)
        case .success(let fd):
            guard rename(temporary, path) == 0 else {
                let reason = String(cString: strerror(keyway_errno()))
                close(fd)
                unlink(temporary)
                throw Failure(reason: "rename to \(path): \(reason)")
            }
            return fd
        }
    }

    /// Accepts connections on `listener` for ever, each served on a thread of its own.
    static func serve(_ listener: Int32, key: SoftKey) -> Never {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if keyway_errno() != EINTR && keyway_errno() != ECONNABORTED { usleep(10_000) }  // EMFILE: no spin
                continue
            }
            _ = keyway_fcntl(client, F_SETFD, FD_CLOEXEC)
            if !spawn({ Connection(fd: client, key: key).serve() }) { close(client) }
        }
    }
}
