import CKeywayLibc
import Dispatch
import Glibc
import KeywayCore
import KeywayPlatform
import KeywayWire
import Synchronization

/// Admission: which connections keywayd takes, counted by place (root, each user, each subordinate range), so no
/// user's flood keeps another out (docs/ARCHITECTURE.md §10, "Fair to the owner").
extension Server {
    /// Whose connection place a connection takes: root's, or a person's (a user with their subordinate uids).
    enum Place: Hashable, Sendable {
        case root
        case person(UInt32)
    }

    /// The place `peer`'s connections take.
    func place(of peer: UnixSocket.Peer) -> Place {
        peer.uid == 0 ? .root : .person(subordinates.person(of: peer.uid))
    }

    /// Takes a connection place at `place`; false when its share is full.
    func admit(_ place: Place) -> Bool {
        connections.withLock { state in
            switch place {
            case .root:
                guard state.root < options.maximumRootConnections else { return false }
                state.root += 1
            case .person(let person):
                let mine = state.byUser[person, default: 0]
                guard state.others < options.maximumOtherConnections, mine < options.maximumPerUser else {
                    return false
                }
                state.byUser[person] = mine + 1
                state.others += 1
            }
            return true
        }
    }

    func release(_ place: Place) {
        connections.withLock { state in
            switch place {
            case .root:
                state.root -= 1
            case .person(let person):
                state.others -= 1
                let left = state.byUser[person, default: 1] - 1
                state.byUser[person] = left > 0 ? left : nil
            }
            state.lastActivity = MonotonicClock.milliseconds()
        }
    }
}
