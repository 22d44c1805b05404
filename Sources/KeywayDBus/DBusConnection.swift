import CDBus
import CKeywayLibc

/// A value in a D-Bus message, as far as fprintd's and logind's interfaces need them.
public enum DBusValue: Sendable, Equatable {
    case string(String)
    case objectPath(String)
    case boolean(Bool)
    case int32(Int32)
    case uint32(UInt32)
    case array([DBusValue])
    /// A descriptor passed in the message (logind's inhibitor): received, it is this process's to close.
    case fileDescriptor(Int32)
    /// A type this client does not read (it is skipped, not misread).
    case unsupported(Character)

    /// The text of a string or an object path.
    public var text: String? {
        switch self {
        case .string(let value), .objectPath(let value): value
        case .boolean, .int32, .uint32, .array, .fileDescriptor, .unsupported: nil
        }
    }
}

/// A D-Bus error reply or a failure of the connection: its name (`org.freedesktop.DBus.Error.ServiceUnknown`,
/// `net.reactivated.Fprint.Error.NoEnrolledPrints`) and message.
public struct DBusFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The error's D-Bus name.
    public let name: String
    /// What the peer or libdbus said.
    public let message: String

    /// Creates a failure.
    public init(_ name: String, _ message: String) {
        self.name = name
        self.message = message
    }

    public var description: String { message.isEmpty ? name : "\(name): \(message)" }

    /// The peer is not on the bus (fprintd absent, or gone).
    public var isServiceGone: Bool {
        name == "org.freedesktop.DBus.Error.ServiceUnknown" || name == "org.freedesktop.DBus.Error.NameHasNoOwner"
    }
    /// The bus itself went away.
    public static let disconnected = DBusFailure("org.freedesktop.DBus.Error.Disconnected", "the bus connection closed")
}

/// A signal received on the connection.
public struct DBusSignal: Sendable, Equatable {
    public let interface: String
    public let member: String
    public let path: String
    public let sender: String
    public let arguments: [DBusValue]
}

/// One private connection to a bus, used by one thread at a time: method calls with a deadline, and the signals
/// that match the rules added. The one caller of libdbus (docs/ARCHITECTURE.md §14, §18).
public final class DBusConnection {
    private let connection: OpaquePointer
    /// This connection's unique name on the bus (":1.42").
    public let uniqueName: String

    /// libdbus's global locks, set up once before any connection (its documentation asks for this when more than
    /// one thread uses it, as keywayd's connection threads do).
    private static let threadsReady: Bool = dbus_threads_init_default() != 0

    private init(_ connection: OpaquePointer, uniqueName: String) {
        self.connection = connection
        self.uniqueName = uniqueName
    }

    deinit {
        dbus_connection_close(connection)
        dbus_connection_unref(connection)
    }

    /// The system bus's address: `DBUS_SYSTEM_BUS_ADDRESS` when set (keywayd's environment is root's or systemd's),
    /// else the well-known socket.
    public static var systemBusAddress: String {
        if let pointer = getenv("DBUS_SYSTEM_BUS_ADDRESS"), pointer.pointee != 0 { return String(cString: pointer) }
        return "unix:path=/run/dbus/system_bus_socket"
    }

    /// Connects to the bus at `address` and registers (Hello).
    public static func open(address: String) throws(DBusFailure) -> DBusConnection {
        _ = threadsReady
        let error = keyway_dbus_error_new()
        defer { keyway_dbus_error_delete(error) }
        guard let raw = dbus_connection_open_private(address, error) else {
            throw failure(error, fallback: "cannot connect to the bus at \(address)")
        }
        dbus_connection_set_exit_on_disconnect(raw, 0)
        guard dbus_bus_register(raw, error) != 0 else {
            let failed = failure(error, fallback: "the bus at \(address) refused the connection")
            dbus_connection_close(raw)
            dbus_connection_unref(raw)
            throw failed
        }
        let name = dbus_bus_get_unique_name(raw).map { String(cString: $0) } ?? ""
        return DBusConnection(raw, uniqueName: name)
    }

    /// True while the bus is connected.
    public var isConnected: Bool { dbus_connection_get_is_connected(connection) != 0 }

    /// Calls `method` and waits at most `timeout` milliseconds for its reply; the reply's arguments.
    @discardableResult
    public func call(
        _ destination: String, _ path: String, _ interface: String, _ method: String, _ arguments: [DBusValue] = [],
        timeout: Int32
    ) throws(DBusFailure) -> [DBusValue] {
        guard let message = dbus_message_new_method_call(destination, path, interface, method) else {
            throw DBusFailure("org.freedesktop.DBus.Error.NoMemory", "cannot build the call \(method)")
        }
        defer { dbus_message_unref(message) }
        var iterator = DBusMessageIter()
        dbus_message_iter_init_append(message, &iterator)
        for argument in arguments {
            guard Self.append(argument, to: &iterator) else {
                throw DBusFailure("org.freedesktop.DBus.Error.InvalidArgs", "cannot send \(argument) to \(method)")
            }
        }
        let error = keyway_dbus_error_new()
        defer { keyway_dbus_error_delete(error) }
        guard let reply = dbus_connection_send_with_reply_and_block(connection, message, timeout, error) else {
            throw Self.failure(error, fallback: "\(method) failed")
        }
        defer { dbus_message_unref(reply) }
        return Self.arguments(of: reply)
    }

    /// Asks the bus to route the signals matching `rule` here.
    public func addMatch(_ rule: String) throws(DBusFailure) {
        let error = keyway_dbus_error_new()
        defer { keyway_dbus_error_delete(error) }
        dbus_bus_add_match(connection, rule, error)
        if dbus_error_is_set(error) != 0 { throw Self.failure(error, fallback: "AddMatch \(rule) failed") }
    }

    /// What waiting for a signal found.
    public enum Wait: Sendable, Equatable {
        case signal(DBusSignal)
        case timedOut
        case disconnected
    }

    /// The next signal, waiting at most `milliseconds`; other messages (late replies) are dropped.
    public func nextSignal(within milliseconds: Int32) -> Wait {
        if let signal = popSignal() { return .signal(signal) }
        guard dbus_connection_read_write(connection, max(0, milliseconds)) != 0, isConnected else {
            return .disconnected
        }
        if let signal = popSignal() { return .signal(signal) }
        return isConnected ? .timedOut : .disconnected
    }

    private func popSignal() -> DBusSignal? {
        while let message = dbus_connection_pop_message(connection) {
            defer { dbus_message_unref(message) }
            guard dbus_message_get_type(message) == keyway_dbus_message_type_signal else { continue }
            func text(_ pointer: UnsafePointer<CChar>?) -> String { pointer.map { String(cString: $0) } ?? "" }
            return DBusSignal(
                interface: text(dbus_message_get_interface(message)), member: text(dbus_message_get_member(message)),
                path: text(dbus_message_get_path(message)), sender: text(dbus_message_get_sender(message)),
                arguments: Self.arguments(of: message))
        }
        return nil
    }

    // MARK: Values

    private static func append(_ value: DBusValue, to iterator: inout DBusMessageIter) -> Bool {
        switch value {
        case .string(let text), .objectPath(let text):
            let type = value == .string(text) ? keyway_dbus_type_string : keyway_dbus_type_object_path
            return text.withCString { pointer in
                var argument: UnsafePointer<CChar>? = pointer
                return dbus_message_iter_append_basic(&iterator, type, &argument) != 0
            }
        case .boolean(let flag):
            var argument: dbus_bool_t = flag ? 1 : 0
            return dbus_message_iter_append_basic(&iterator, keyway_dbus_type_boolean, &argument) != 0
        case .int32(let number):
            var argument = number
            return dbus_message_iter_append_basic(&iterator, keyway_dbus_type_int32, &argument) != 0
        case .uint32(let number):
            var argument = number
            return dbus_message_iter_append_basic(&iterator, keyway_dbus_type_uint32, &argument) != 0
        case .array, .fileDescriptor, .unsupported:
            return false  // neither fprintd's methods nor logind's Inhibit take one
        }
    }

    private static func arguments(of message: OpaquePointer) -> [DBusValue] {
        var iterator = DBusMessageIter()
        guard dbus_message_iter_init(message, &iterator) != 0 else { return [] }
        return values(&iterator)
    }

    private static func values(_ iterator: inout DBusMessageIter) -> [DBusValue] {
        var values: [DBusValue] = []
        while true {
            let type = dbus_message_iter_get_arg_type(&iterator)
            if type == keyway_dbus_type_invalid { break }
            values.append(value(&iterator, type: type))
            if dbus_message_iter_next(&iterator) == 0 { break }
        }
        return values
    }

    private static func value(_ iterator: inout DBusMessageIter, type: Int32) -> DBusValue {
        switch type {
        case keyway_dbus_type_string, keyway_dbus_type_object_path:
            var pointer: UnsafePointer<CChar>? = nil
            dbus_message_iter_get_basic(&iterator, &pointer)
            let text = pointer.map { String(cString: $0) } ?? ""
            return type == keyway_dbus_type_string ? .string(text) : .objectPath(text)
        case keyway_dbus_type_boolean:
            var flag: dbus_bool_t = 0
            dbus_message_iter_get_basic(&iterator, &flag)
            return .boolean(flag != 0)
        case keyway_dbus_type_int32:
            var number: Int32 = 0
            dbus_message_iter_get_basic(&iterator, &number)
            return .int32(number)
        case keyway_dbus_type_uint32:
            var number: UInt32 = 0
            dbus_message_iter_get_basic(&iterator, &number)
            return .uint32(number)
        case keyway_dbus_type_unix_fd:
            // libdbus hands over a duplicate the caller owns.
            var descriptor: Int32 = -1
            dbus_message_iter_get_basic(&iterator, &descriptor)
            return .fileDescriptor(descriptor)
        case keyway_dbus_type_array:
            var inner = DBusMessageIter()
            dbus_message_iter_recurse(&iterator, &inner)
            return .array(values(&inner))
        case keyway_dbus_type_variant:
            var inner = DBusMessageIter()
            dbus_message_iter_recurse(&iterator, &inner)
            let innerType = dbus_message_iter_get_arg_type(&inner)
            return innerType == keyway_dbus_type_invalid ? .unsupported("v") : value(&inner, type: innerType)
        default:
            return .unsupported(Character(Unicode.Scalar(UInt8(truncatingIfNeeded: type))))
        }
    }

    private static func failure(_ error: UnsafeMutablePointer<DBusError>?, fallback: String) -> DBusFailure {
        guard let error, dbus_error_is_set(error) != 0 else {
            return DBusFailure("org.freedesktop.DBus.Error.Failed", fallback)
        }
        let name = keyway_dbus_error_name(error).map { String(cString: $0) } ?? "org.freedesktop.DBus.Error.Failed"
        let message = keyway_dbus_error_message(error).map { String(cString: $0) } ?? fallback
        return DBusFailure(name, message)
    }
}
