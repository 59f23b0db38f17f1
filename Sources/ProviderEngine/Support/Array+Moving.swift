extension Array {
    /// Reverses the elements by moving them. `MutableCollection.reverse()` on an array swaps
    /// through copies: a retain and a release of every string and blob an element holds. The
    /// walk reverses a folder's items to take them from the end (`popLast`, a move) in their
    /// order: a first sync takes a million.
    mutating func reverseByMoving() {
        withUnsafeMutableBufferPointer { $0.reverse() }
    }
}
