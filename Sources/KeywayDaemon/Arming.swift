import CKeywayLibc
import Glibc
public import KeywayCore
import KeywayPlatform
import KeywayWire
import Synchronization

/// Where keywayd waits at the devices of presented factors for an armed authentication (`first of`, and a presented
/// factor's sequential wait; docs/ARCHITECTURE.md §14). Each factor says how its device is made and how long it is
/// waited for (`FactorPlugin.Arming`); keywayd names none.
public struct ArmingOptions: Sendable {
    /// The default control directory and settings, no backends.
    public init() {}

    /// Where simulated devices take their events (`--sensor`).
    public var controlDirectory = FactorPlugin.DeviceSide.defaultControlDirectory
    /// keyway.conf's settings: each factor's device, and how long it is waited for.
    public var settings = SettingsBook()
    /// The device backends keywayd's composition built (fprintd's reader as "fprintd"), by name.
    public var backends: [String: any DeviceBackend] = [:]
    /// Whether the machine is going to sleep (devices are given back meanwhile), and how many are held.
    public var sleep = SleepState()

    /// The listener for one lease of `plugin`'s device, given the user's stored enrollment and what the person typed
    /// for the device.
    func listener(
        for plugin: FactorPlugin, _ arming: FactorPlugin.Arming, user: UserContext, enrollment: Enrollment?,
        typed: Secret?
    ) -> any DeviceListener {
        arming.listener(
            .init(
                settings: settings[plugin.kind], user: user, limit: .milliseconds(Leases.maximumDuration),
                controlDirectory: controlDirectory, backends: backends, enrollment: enrollment, typed: typed))
    }

    /// The factor's wait setting in milliseconds: how long an authentication waits in line for its device, and how
    /// long a lease may keep it while another authentication waits.
    func timeout(_ plugin: FactorPlugin, _ arming: FactorPlugin.Arming) -> Int64 {
        let duration = settings[plugin.kind].duration(arming.waitSetting) ?? .seconds(30)
        return duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }
}

extension Server {
    /// Serves an `arm` request (`first of`, and a presented factor's sequential wait): checks that the factor's device
    /// may answer this authentication (its plugin's `ArmingRule`), takes it (in line, with `waits`), answers with the nonce, then listens, matching and counting
    /// each touch at once and writing one byte to the client for each, so a client waiting on the connection wakes.
    /// The device is given back as soon as the lease has what it can use, when the client closes the connection or
    /// dies, after the biometric timeout while another authentication waits, or at `Leases.maximumDuration`; the
    /// lease stays claimable until the client closes it.
    /// `request` is vouched for already (`VaultService.vouched`): `user.startedBy` is the one keywayd trusts.
    func serveArm(
        _ request: Request, factor: FactorKind, user: UserContext, waits: Bool, typed: Secret?,
        from caller: VaultService.Caller, at place: Place, on fd: Int32
    ) {
        guard let seat = seats[factor] else {
            reply(.failure(AuthenticationError(.factorNotAvailable, "the \(factor) has no device to arm")), to: fd)
            return
        }
        if let refusal = VaultService.refusal(of: request, by: caller) {
            reply(.failure(AuthenticationError(.notPermitted, refusal)), to: fd)
            return
        }
        // A touch proves only that someone is at the device: an authentication it may not answer never takes it.
        if let refusal = service.armingRefusal(of: factor, user, by: caller) {
            Server.logLimited(
                "\(caller.label): \(seat.name) refused for \(user.name.escapingControlCharacters): \(refusal.reason)")
            reply(.failure(refusal), to: fd)
            return
        }
        let timeout = seat.timeout
        let line = seat.line
        let leases = service.leases
        // The one connection that may carry a descriptor: the terminal the module in a root host deposits.
        let disposer = self.disposer
        let custody = TerminalHolder(acceptsCustody: caller.isRoot) { disposer.dispose($0, for: place) }
        if caller.isRoot { UnixSocket.acceptDescriptors(true, on: fd) }
        // A terminal the module reads itself (read-tty) is deposited here with its settings, and put back if the
        // client goes without withdrawing it: a host killed in the middle of the read.
        func clientGone() -> Bool { custody.take(from: fd) }
        defer {
            if clientGone() { custody.restore() } else { custody.release() }
            if let error = custody.protocolError { Server.logLimited("\(caller.label): lease ended: \(error)") }
        }
        func wake() {
            var byte: UInt8 = 1
            _ = send(fd, &byte, 1, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
        }
        let startedAt = MonotonicClock.milliseconds()
        // The lease stays claimable until the client closes the connection (or the limit passes).
        func keepClaimable() {
            while !clientGone() && MonotonicClock.milliseconds() < startedAt + Leases.maximumDuration {
                var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                _ = poll(&entry, 1, 1000)
            }
        }
        // The device's turn. A sequential wait waits in line before it is answered. A `first of` finding the device
        // held is answered armed at once (its prompt goes on meanwhile) and waits in the same line, so the holder's
        // lease ends after the timeout for it as for a sequential wait, and no one holds the device against it.
        var ticket = line.take(waits: false, within: 0, gone: { false })
        if ticket == nil && waits {
            guard let turn = placeInLine(waits: true, at: seat, on: fd) else { return }
            ticket = turn
        } else if ticket == nil {
            let answer = service.answer(request, from: caller, inLine: true)
            reply(answer, to: fd)
            guard case .armed(let armed) = answer else { return }
            defer { leases.close(armed) }
            ticket = line.take(waits: true, within: timeout + DeviceLine.handover, gone: clientGone)
            guard let turn = ticket else {
                leases.end(armed, with: service.deviceBusy(factor))
                wake()
                return keepClaimable()
            }
            guard leases.hold(armed) else {
                line.release(turn)
                leases.end(armed, with: service.deviceBusy(factor))
                wake()
                return keepClaimable()
            }
            return listen(
                armed, at: seat, ticket: turn, request, user: user, waits: true, typed: typed, from: caller, on: fd,
                custody: custody, wake: wake, keepClaimable: keepClaimable)
        }
        guard let turn = ticket else { return }
        listen(
            nil, at: seat, ticket: turn, request, user: user, waits: waits, typed: typed, from: caller, on: fd,
            custody: custody, wake: wake, keepClaimable: keepClaimable)
    }

    /// The device held for one arming (`ticket`, its turn in the line): holds the device, answers the client unless it
    /// was answered already (`early`, the nonce of a lease made in line), then listens until the lease has what it
    /// can use, its client goes, or it has kept the device for the timeout while someone else waits.
    private func listen(
        _ early: [UInt8]?, at seat: DeviceSeat, ticket: UInt64, _ request: Request, user: UserContext, waits: Bool,
        typed: Secret?, from caller: VaultService.Caller, on fd: Int32, custody: TerminalHolder, wake: () -> Void,
        keepClaimable: () -> Void
    ) {
        let timeout = seat.timeout
        let factor = seat.plugin.kind
        let leases = service.leases
        let line = seat.line
        let sleep = arming.sleep
        let enrollment: Enrollment?
        do throws(AuthenticationError) {
            enrollment = seat.arming.readsEnrollment ? try service.vault.record(of: factor, for: user.name) : nil
        } catch {
            Server.logLimited("\(caller.label): \(seat.name) not armed: \(error.reason)")
            if let early {
                leases.end(early, with: error)
                wake()
            } else {
                reply(.failure(error), to: fd)
            }
            line.release(ticket)
            if early != nil { keepClaimable() }
            return
        }
        var device = arming.listener(
            for: seat.plugin, seat.arming, user: user, enrollment: enrollment, typed: typed)
        // Says why the device cannot serve this arming: to the client, or on the lease it was answered already.
        func fail(_ error: AuthenticationError) {
            guard let early else { return reply(.failure(error), to: fd) }
            leases.end(early, with: error)
            wake()
        }
        // Takes the device, or says why not (nil). A device another program holds (fprintd's reader claimed by
        // another client) is said in the log; a sequential wait waits for it, within its timeout, as it would in
        // keywayd's own line. None is taken while the machine goes to sleep.
        func take(waits: Bool) -> DeviceHoldFailure? {
            let holdUntil = MonotonicClock.milliseconds() + timeout
            var toldBusy = false
            while true {
                if sleep.isAsleep {
                    guard waits, sleep.awaitResume(until: holdUntil, unless: { UnixSocket.peerHasClosed(fd) }) else {
                        return .unavailable(Self.asleep)
                    }
                }
                do throws(DeviceHoldFailure) {
                    try device.hold()
                    sleep.took()
                    return nil
                } catch {
                    guard case .busy = error else { return error }
                    if !toldBusy {
                        toldBusy = true
                        Server.logLimited(
                            "\(caller.label): the \(factor) device is held by another program"
                                + (waits ? "; waiting for it up to \(timeout / 1000) s" : "; answered busy"))
                    }
                    guard waits && MonotonicClock.milliseconds() < holdUntil && !UnixSocket.peerHasClosed(fd) else {
                        return error
                    }
                    usleep(250_000)
                }
            }
        }
        if let failure = take(waits: waits) {
            switch failure {
            case .busy: fail(service.deviceBusy(factor))
            case .unavailable(let why):
                Server.logLimited("\(caller.label): \(seat.name) is unavailable: \(why.reason)")
                fail(why)
            }
            line.release(ticket)
            if early != nil { keepClaimable() }
            return
        }
        let heldSince = MonotonicClock.milliseconds()
        var nonce: [UInt8]? = early
        var holding = true
        func giveBack() {
            guard holding else { return }
            holding = false
            device.release()
            sleep.gaveBack()
            if let nonce { leases.release(nonce) }
            line.release(ticket)
        }
        defer { giveBack() }
        if early == nil {
            let answer = service.answer(request, from: caller)
            reply(answer, to: fd)
            guard case .armed(let armed) = answer else { return }
            nonce = armed
        }
        guard let armed = nonce else { return }
        defer { if early == nil { leases.close(armed) } }
        @Sendable func overstaying() -> Bool {
            line.othersWaiting && MonotonicClock.milliseconds() - heldSince >= timeout
        }
        // Stops when the client has gone (its socket closed: a killed sudo included), the lease wants no more, it
        // has kept the device for the timeout while someone else waits for it, or the machine goes to sleep.
        let stop = CancellationFlag(following: CancellationFlag()) {
            custody.take(from: fd) || !leases.wantsMore(armed) || overstaying() || sleep.isAsleep
        }
        while true {
            while let event = device.next(cancellation: stop) {
                // A device may end its wait because the machine goes to sleep (fprintd suspends its readers on the
                // signal keywayd follows, and the verification ends in an error): not the person's, not the end.
                if case .ended(let outcome) = event, !Self.isPersons(outcome), sleep.begins(within: 300) { continue }
                switch event {
                case .evidence(let evidence):
                    do {
                        leases.record(try service.vault.verify(evidence, of: factor, for: user), for: armed)
                    } catch {
                        // A refusal with a reason (a key whose counter did not increase: it may have been cloned) is
                        // logged.
                        Server.logLimited(
                            "\(caller.label): \(seat.name) of \(user.name.escapingControlCharacters): \(error.reason)")
                        leases.end(armed, with: error)
                    }
                case .unusable(let reason):
                    leases.record(.failure(.noSample(reason)), for: armed)
                case .ended(let outcome):
                    // The device's own reasons (unplugged, its PIN blocked, stopped) are logged; the person's are not.
                    if !Self.isPersons(outcome) {
                        Server.logLimited("\(caller.label): the wait at \(seat.name) ended: \(outcome.reason)")
                    }
                    leases.end(armed, with: outcome)
                }
                device.handled()
                wake()
            }
            // The machine goes to sleep: the device is given back before it does, and taken again after the resume
            // for the same lease, whose prompt waits meanwhile (docs/ARCHITECTURE.md §14, "Sleep").
            guard sleep.isAsleep, holding, leases.wantsMore(armed), !custody.take(from: fd) else { break }
            device.sleeping()
            sleep.gaveBack()
            Server.logLimited("\(caller.label): \(seat.name) given back for sleep; taken again after the resume")
            let resumed = sleep.awaitResume(
                until: heldSince + Leases.maximumDuration,
                unless: { custody.take(from: fd) || !leases.wantsMore(armed) })
            device.release()
            device = arming.listener(for: seat.plugin, seat.arming, user: user, enrollment: enrollment, typed: typed)
            guard resumed, take(waits: true) == nil else {
                holding = false
                if let nonce { leases.release(nonce) }
                line.release(ticket)
                if resumed {
                    leases.end(
                        armed,
                        with: AuthenticationError(
                            .biometryNotAvailable, "\(seat.name) could not be taken again after the resume"))
                    wake()
                }
                break
            }
            Server.logLimited("\(caller.label): \(seat.name) taken again after the resume")
        }
        if leases.wantsMore(armed) && overstaying() {
            Server.logLimited(
                "\(caller.label): lease for \(user.name.escapingControlCharacters) ended after \(timeout / 1000) s: "
                    + "another authentication waits for \(seat.name)")
            leases.end(
                armed,
                with: AuthenticationError(
                    .systemCancel, "\(seat.name) was given to another authentication waiting for it"))
            wake()
        }
        giveBack()  // the lease has what it can use: the next in line need not wait for this client
        keepClaimable()
    }
}

extension Server {
    /// True for the ends of a wait the person chose (cancelled, the fallback, the application's cancel).
    static func isPersons(_ outcome: AuthenticationError) -> Bool {
        [.userCancel, .userFallback, .appCancel].contains(outcome.code)
    }

    /// Why a device is not taken now: the machine is going to sleep (`SleepState`).
    static var asleep: AuthenticationError {
        AuthenticationError(.biometryNotAvailable, "the machine is going to sleep")
    }

    /// The device's turn for the client on `fd` (waiting in line with `waits`, for at most the biometric timeout
    /// and the handover), or nil once the client has been answered that the device is busy.
    func placeInLine(waits: Bool, at seat: DeviceSeat, on fd: Int32) -> UInt64? {
        guard
            let ticket = seat.line.take(
                waits: waits, within: seat.timeout + DeviceLine.handover, gone: { UnixSocket.peerHasClosed(fd) })
        else {
            reply(.failure(service.deviceBusy(seat.plugin.kind)), to: fd)
            return nil
        }
        return ticket
    }

    /// How long an enrollment at the device may take, the touches of all its stages included.
    static let enrollmentLimit: Int64 = 120_000

    /// `enrollAtDevice`: root's request to enroll a finger at fprintd's reader. It waits in the device's line like
    /// any wait at the device, sends each step as a `.progress` frame, and ends when the client goes (the kernel
    /// closes its socket), after `enrollmentLimit`, or when it has held the device for the biometric timeout while
    /// an authentication waits for it; the reader is released in every case.
    func serveEnrollmentAtDevice(_ request: Request, factor: FactorKind, from caller: VaultService.Caller, on fd: Int32)
    {
        if let refusal = VaultService.refusal(of: request, by: caller) {
            Server.logLimited("\(caller.label): \(request.name) refused: \(refusal)")
            reply(.failure(AuthenticationError(.notPermitted, refusal)), to: fd)
            return
        }
        guard let seat = seats[factor] else {
            reply(.failure(AuthenticationError(.factorNotAvailable, "the \(factor) has no device")), to: fd)
            return
        }
        let timeout = seat.timeout
        guard let ticket = placeInLine(waits: true, at: seat, on: fd) else { return }
        let line = seat.line
        // An enrollment at the device ends when the machine goes to sleep: the person starts it again after.
        let sleep = arming.sleep
        sleep.took()
        defer {
            sleep.gaveBack()
            line.release(ticket)
        }
        let started = MonotonicClock.milliseconds()
        let answer = service.answer(
            request, from: caller, progress: { step in reply(.progress(step), to: fd) },
            cancelled: {
                let held = MonotonicClock.milliseconds() - started
                return UnixSocket.peerHasClosed(fd) || held >= Self.enrollmentLimit
                    || (line.othersWaiting && held >= timeout) || sleep.isAsleep
            })
        if case .failure(let error) = answer {
            Server.logLimited("\(caller.label): \(request.name) ended: \(error.reason)")
        }
        reply(answer, to: fd)
    }
}
