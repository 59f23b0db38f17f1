extension Array {
    /// Sorts the array by a key of each element, moving each element once: the keys are read
    /// once each (`key`), their positions sorted by `areInIncreasingOrder`, then the elements
    /// moved along the permutation's cycles, in place. For elements of a few hundred bytes (an
    /// `Item`, an `ItemRecord`), which a sort of the elements themselves moves at every step,
    /// and whose sorted copy would double the memory a batch holds. (A comparison given whole
    /// elements copied them, every reference in them retained and released, at each step.)
    public mutating func sortMovingOnce<Key>(by key: (Element) -> Key, _ areInIncreasingOrder: (Key, Key) -> Bool) {
        let keys = map(key)
        var order = keys.indices.sorted { areInIncreasingOrder(keys[$0], keys[$1]) }
        // Position i takes the element at order[i]; a position done points at itself.
        for start in order.indices where order[start] != start {
            let first = self[start]
            var position = start
            while order[position] != start {
                let next = order[position]
                self[position] = self[next]
                order[position] = position
                position = next
            }
            self[position] = first
            order[position] = position
        }
    }
}
