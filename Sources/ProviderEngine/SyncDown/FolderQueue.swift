/// The folders sync down's walk still has to list, taken in path order (a binary heap): the
/// walk lists the first folders of the tree first, so their listings, and the rows they
/// bring, reach the database about in the order of its indexes (``PullPass/defersFolderRecords``),
/// whichever of the listings running at once ends first. Holds what a stack would: the
/// subfolders of the folders listed so far and not yet listed.
struct FolderQueue {
    private var heap: [FolderVisit] = []

    var isEmpty: Bool { heap.isEmpty }

    init(_ visits: [FolderVisit] = []) {
        for visit in visits { push(visit) }
    }

    /// Adds a folder to list.
    mutating func push(_ visit: FolderVisit) {
        heap.append(visit)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard Self.precedes(heap[child], heap[parent]) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    mutating func push<S: Sequence>(contentsOf visits: S) where S.Element == FolderVisit {
        for visit in visits { push(visit) }
    }

    /// Takes the folder first in path order, `nil` when none is left.
    mutating func pop() -> FolderVisit? {
        guard !heap.isEmpty else { return nil }
        heap.swapAt(0, heap.count - 1)
        let first = heap.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < heap.count, Self.precedes(heap[left], heap[smallest]) { smallest = left }
            if right < heap.count, Self.precedes(heap[right], heap[smallest]) { smallest = right }
            if smallest == parent { break }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
        return first
    }

    /// Path order by bytes (SQLite's `BINARY` collation), the order of the `item_path` index.
    private static func precedes(_ a: FolderVisit, _ b: FolderVisit) -> Bool {
        a.record.path.utf8.lexicographicallyPrecedes(b.record.path.utf8)
    }
}
