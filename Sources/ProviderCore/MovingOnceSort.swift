extension Array {
    /// Sorts the array by a key of each element, moving each element once: the keys are read
    /// once each (`key`), their positions sorted by `areInIncreasingOrder`, then the elements
    /// moved along the permutation's cycles, in place. For elements of a few hundred bytes (an
    /// `Item`, an `ItemRecord`), which a sort of the elements themselves moves at every step,
    /// and whose sorted copy would double the memory a batch holds. (A comparison given whole
    /// elements copied them, every reference in them retained and released, at each step.)
    /// Keys already in order (a first sync's batches mostly are) leave the array as it is.
    /// Stable: elements of equal keys keep their order. Inlinable, so that each caller gets it
    /// for its own element and key types: generic, every key handed to the comparison was
    /// retained and released, and tuple metadata looked up, at each step.
    @inlinable
    public mutating func sortMovingOnce<Key>(by key: (Element) -> Key, _ areInIncreasingOrder: (Key, Key) -> Bool) {
        if count < 2 { return }
        // Read in place: `map` hands each element over as a copy, every reference in it
        // retained and released.
        let keys = withUnsafeBufferPointer { elements in elements.indices.map { key(elements[$0]) } }
        var order = keys.withUnsafeBufferPointer { keys -> [Int] in
            if (1..<keys.count).allSatisfy({ !areInIncreasingOrder(keys[$0], keys[$0 - 1]) }) { return [] }
            return keys.indices.sorted { areInIncreasingOrder(keys[$0], keys[$1]) }
        }
        if order.isEmpty { return }
        // Position i takes the element at order[i]; a position done points at itself. Each
        // element is moved out of its place and into the next, never copied.
        withUnsafeMutableBufferPointer { elements in
            guard let base = elements.baseAddress else { return }
            for start in order.indices where order[start] != start {
                let first = (base + start).move()
                var position = start
                while order[position] != start {
                    let next = order[position]
                    (base + position).moveInitialize(from: base + next, count: 1)
                    order[position] = position
                    position = next
                }
                (base + position).initialize(to: first)
                order[position] = position
            }
        }
    }
}
