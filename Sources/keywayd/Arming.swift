import Glibc
import KeywayBiometricSimulator
import KeywayCore
import KeywayPlatform
import KeywayWire

/// Where keywayd waits at the device for an armed authentication (`first of`, docs/ARCHITECTURE.md §14).
struct ArmingOptions: Sendable {
    /// The simulated sensor's control directory (`--sensor`).
    var sensorDirectory = SensorControl.defaultDirectory
    /// The biometric settings of keyway.conf: the sensor's kind and its false-match rate.
    var settings = FactorSettings()
}

extension Server {
    /// Serves an `arm` request: takes the sensor, answers with the nonce, then listens for as long as the client
    /// keeps this connection open (at most `Leases.maximumDuration`), matching and counting each touch at once and
    /// writing one byte to the client for each, so a client that waits on the connection wakes. The sensor is given
    /// back when the client closes the connection or dies, when the lease has what it can use, or at the limit.
    func serveArm(
        _ request: Request, factor: FactorKind, user: UserContext, from caller: VaultService.Caller, on fd: Int32
    ) {
        guard factor == .biometric else {
            reply(.failure(AuthenticationError(.factorNotAvailable, "only the sensor can be armed")), to: fd)
            return
        }
        if let refusal = VaultService.refusal(of: request, by: caller) {
            reply(.failure(AuthenticationError(.notPermitted, refusal)), to: fd)
            return
        }
        let events = SocketSensorEvents(directory: arming.sensorDirectory, owner: 0, acknowledgesAfterHandling: true)
        if case .failure(let error) = events.hold() {
            let busy = error.description.contains("in use")
            reply(
                .failure(
                    busy
                        ? VaultService.deviceBusy(factor)
                        : AuthenticationError(.biometryNotAvailable, "keywayd cannot listen at the sensor: \(error)")),
                to: fd)
            return
        }
        defer { events.release() }
        let answer = service.answer(request, from: caller)
        reply(answer, to: fd)
        guard case .armed(let nonce) = answer else { return }
        defer { service.leases.close(nonce) }
        let leases = service.leases
        let sensor = SimulatedSensor(
            .init(
                biometry: BiometricAuthenticator.biometry(arming.settings),
                model: BiometricAuthenticator.model(arming.settings),
                timeout: .milliseconds(Leases.maximumDuration)),
            events: events)
        // Stops when the client has gone (its socket closed: a killed sudo included) or the lease wants no more.
        let stop = CancellationFlag(following: CancellationFlag()) {
            UnixSocket.peerHasClosed(fd) || !leases.wantsMore(nonce)
        }
        while let event = sensor.next(cancellation: stop) {
            switch event {
            case .plug:
                continue
            case .present, .presentStranger:
                guard let sample = sensor.sample(of: event) else { continue }
                do {
                    leases.record(
                        try service.vault.verify(.samples([sample.components]), of: .biometric, for: user), for: nonce)
                } catch {
                    leases.end(nonce, with: error)
                }
            case .retry(let reason):
                leases.record(.failure(.noSample(reason)), for: nonce)
            case .cancel:
                leases.end(nonce, with: AuthenticationError(.userCancel, "cancelled at the sensor"))
            case .fallback:
                leases.end(nonce, with: AuthenticationError(.userFallback, "the fallback was chosen at the sensor"))
            case .unplug:
                leases.end(nonce, with: AuthenticationError(.biometryNotAvailable, "the sensor was unplugged"))
            case .failure(let reason):
                leases.end(nonce, with: AuthenticationError(.biometryNotAvailable, "the sensor failed: \(reason)"))
            }
            events.acknowledge()  // the sender hears "ok" once a claim would see the touch
            var wake: UInt8 = 1
            _ = send(fd, &wake, 1, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
        }
        // The lease stays claimable until the client closes the connection (or the limit passes).
        let deadline = UnixSocket.monotonicMilliseconds() + Leases.maximumDuration
        while !UnixSocket.peerHasClosed(fd) && UnixSocket.monotonicMilliseconds() < deadline {
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&entry, 1, 1000)
            if entry.revents & Int16(POLLIN) != 0 && !UnixSocket.peerHasClosed(fd) {
                var byte: UInt8 = 0
                if recv(fd, &byte, 1, Int32(MSG_DONTWAIT)) <= 0 { break }  // a client writing here is done
            }
        }
    }
}
