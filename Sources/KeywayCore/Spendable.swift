/// The parts of a factor's record that a use changes — uses left, a signature counter, a clone mark — told apart from
/// the rest, which only an enrollment changes. A store many hosts share keeps each part as a row with its rule and
/// judges a host's use by that rule alone ("falls by one", "rises by at most N"), so it parses no factor's bytes
/// (docs/ARCHITECTURE.md §17, "Spendable parts"). A host's own store keeps the record whole and never splits it.
public struct SpendableParts: Sendable, Equatable {
    /// What a use never changes, in the factor's own encoding.
    public var fixed: [UInt8]
    /// The parts a use may change, in the record's order.
    public var items: [SpendableItem]

    /// Creates the parts.
    public init(fixed: [UInt8], items: [SpendableItem]) {
        self.fixed = fixed
        self.items = items
    }
}

/// One part of a record a use may change.
public struct SpendableItem: Sendable, Equatable {
    /// What it is, in the record's words (a recovery code's hash, `uses`, `counter of KEY`); never a line break.
    public var name: String
    /// Its value now.
    public var value: Int64
    /// How a use may change it.
    public var rule: SpendRule

    /// Creates an item.
    public init(_ name: String, _ value: Int64, _ rule: SpendRule) {
        self.name = name
        self.value = value
        self.rule = rule
    }
}

/// How one use may change a spendable part.
public enum SpendRule: Sendable, Equatable {
    /// Uses left: a use takes exactly one, and none is ever given back.
    case fallsByOne
    /// A counter or a mark: a use raises it by 1 to `step`, never beyond `ceiling`, and never lowers it.
    case rises(step: Int64, ceiling: Int64)

    /// Whether one use may take the part from `old` to `new`.
    public func allows(from old: Int64, to new: Int64) -> Bool {
        switch self {
        case .fallsByOne: new == old - 1 && new >= 0
        case .rises(let step, let ceiling): new > old && new - old <= step && new <= ceiling
        }
    }
}

/// How one factor's record splits into its spendable parts and is put back together: the factor's own code, declared
/// by its plugin (`FactorPlugin.spendable`), so a store that keeps the parts apart knows no format.
/// `join(split(record)!)` is the record again, byte for byte; `split` is nil for bytes that are not such a record, and
/// `join` nil for parts that make none.
public struct SpendableLayout: Sendable {
    /// The factor whose records these are.
    public let factor: FactorKind
    /// The record's parts.
    public let split: @Sendable ([UInt8]) -> SpendableParts?
    /// The record from its parts.
    public let join: @Sendable (SpendableParts) -> [UInt8]?

    /// Declares a layout.
    public init(
        _ factor: FactorKind, split: @escaping @Sendable ([UInt8]) -> SpendableParts?,
        join: @escaping @Sendable (SpendableParts) -> [UInt8]?
    ) {
        self.factor = factor
        self.split = split
        self.join = join
    }
}

/// The layouts a store is given, by factor.
public struct SpendableLayouts: Sendable, Equatable {
    /// The layouts.
    public let all: [SpendableLayout]

    /// Layouts from a list; a factor's first one counts.
    public init(_ layouts: [SpendableLayout]) { all = layouts }

    /// The layout of `factor`, if it has one.
    public subscript(factor: FactorKind) -> SpendableLayout? { all.first { $0.factor == factor } }

    /// The factors with a layout.
    public var factors: [FactorKind] { all.map { $0.factor } }

    public static func == (lhs: SpendableLayouts, rhs: SpendableLayouts) -> Bool { lhs.factors == rhs.factors }
}

/// One use of a record, as the spendable parts see it (`SpendableUse.between`).
public struct SpendableUse: Sendable, Equatable {
    /// The part it changes, nil for a use that changes nothing (a key that keeps no counter).
    public var name: String?
    /// Its value before and after.
    public var from: Int64
    public var to: Int64

    /// Creates a use.
    public init(name: String?, from: Int64, to: Int64) {
        self.name = name
        self.from = from
        self.to = to
    }

    /// What `new` changes of `old`, when it is one use: the same fixed part, and at most one item changed, found by
    /// its name (an item `new` no longer holds, such as a recovery code taken out, is spent to 0). Nil when it is not
    /// a use (the fixed part differs, an item is added, or two change).
    public static func between(_ old: SpendableParts, _ new: SpendableParts) -> SpendableUse? {
        guard old.fixed == new.fixed else { return nil }
        var unmatched = new.items
        var changes: [SpendableUse] = []
        for item in old.items {
            if let at = unmatched.firstIndex(where: { $0.name == item.name }) {
                let now = unmatched.remove(at: at)
                if now.value != item.value {
                    changes.append(SpendableUse(name: item.name, from: item.value, to: now.value))
                }
            } else if item.value != 0 {
                changes.append(SpendableUse(name: item.name, from: item.value, to: 0))
            }
        }
        guard unmatched.isEmpty, changes.count <= 1 else { return nil }
        return changes.first ?? SpendableUse(name: nil, from: 0, to: 0)
    }
}
