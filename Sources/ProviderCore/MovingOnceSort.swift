extension Array {
    /// Sorts the array by `areInIncreasingOrder`, moving each element once: the positions are
    /// sorted, then the elements moved along the permutation's cycles, in place. For elements of
    /// a few hundred bytes (an `Item`, an `ItemRecord`), which a sort of the elements themselves
    /// moves at every step, and whose sorted copy would double the memory a batch holds.
    /// - Throws: what `areInIncreasingOrder` throws; the array is unchanged then.
    public mutating func sortMovingOnce(by areInIncreasingOrder: (Element, Element) throws -> Bool) rethrows {
        var order = try indices.sorted { try areInIncreasingOrder(self[$0], self[$1]) }
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
