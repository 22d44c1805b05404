import CKeywayLibc

/// Runs `body` on a new detached thread with a 1 MiB stack; false when no thread could be made.
public func spawn(_ body: @escaping @Sendable () -> Void) -> Bool {
    final class Box {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let box = Unmanaged.passRetained(Box(body)).toOpaque()
    let attributes = UnsafeMutablePointer<pthread_attr_t>.allocate(capacity: 1)
    pthread_attr_init(attributes)
    defer {
        pthread_attr_destroy(attributes)
        attributes.deallocate()
    }
    pthread_attr_setdetachstate(attributes, Int32(PTHREAD_CREATE_DETACHED))
    pthread_attr_setstacksize(attributes, 1 << 20)
    var thread = pthread_t()
    let result = pthread_create(
        &thread, attributes,
        { raw in
            Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue().body()
            return nil
        }, box)
    if result != 0 { Unmanaged<Box>.fromOpaque(box).release() }
    return result == 0
}
