import CFUSE

#if canImport(Glibc)
    import Glibc
#endif

/// libfuse's table of low-level operations: each turns a kernel request into a call of the
/// session's ``FUSEFileSystem`` and its answer (or ``FUSEError``) into the reply. Runs on the
/// session's threads.
///
/// An open file's `fh` is its backing descriptor plus 1, so that 0 (what the kernel sends for
/// an item opened without ``FUSEFileSystem/open(_:flags:by:)``) means none. An open folder's
/// `fh` is the file system's handle (``FUSEOpenFolder/handle``) with the top bit set, so that
/// a request about an open folder (`fchmod` of it) never takes it for a descriptor.
enum FUSEOperations {
    static var table: fuse_lowlevel_ops {
        var operations = fuse_lowlevel_ops()
        operations.`init` = { userData, connection in
            guard let userData, let connection else { return }
            let session = Unmanaged<FUSESession>.fromOpaque(userData).takeUnretainedValue()
            let options = session.options
            fp_fuse_configure(
                connection, options.writebackCache ? 1 : 0, options.listingsWithAttributes ? 1 : 0, options.maximumRequestBytes)
            session.writebackGranted.store(fp_fuse_writeback_granted(connection) != 0, ordering: .sequentiallyConsistent)
            if options.handlesKillPrivileges, let libfuse = session.libfuseSession {
                session.killPrivilegesGranted.store(fp_fuse_grant_killpriv(libfuse, connection) != 0, ordering: .sequentiallyConsistent)
            }
        }
        operations.lookup = { request, parent, name in
            let (session, requester) = FUSEOperations.context(request)
            guard let name else { return FUSEOperations.fail(request, .invalid) }
            do throws(FUSEError) {
                let attributes = try session.fileSystem.lookup(FUSEName(cString: name), in: parent, by: requester)
                FUSEOperations.replyEntry(request, attributes, session)
            } catch {
                if error == .noEntry, session.options.negativeTimeout > 0 {
                    var entry = fuse_entry_param()
                    entry.entry_timeout = session.options.negativeTimeout
                    _ = fp_fuse_reply_entry(request, &entry)
                } else {
                    FUSEOperations.fail(request, error)
                }
            }
        }
        operations.forget = { request, inode, lookups in
            FUSEOperations.context(request).0.fileSystem.forget(inode, lookups: lookups)
            fp_fuse_reply_none(request)
        }
        operations.forget_multi = { request, count, forgets in
            let fileSystem = FUSEOperations.context(request).0.fileSystem
            if let forgets {
                for index in 0..<count { fileSystem.forget(forgets[index].ino, lookups: forgets[index].nlookup) }
            }
            fp_fuse_reply_none(request)
        }
        operations.getattr = { request, inode, file in
            let (session, requester) = FUSEOperations.context(request)
            do throws(FUSEError) {
                let attributes = try session.fileSystem.attributes(of: inode, descriptor: FUSEOperations.descriptor(file), by: requester)
                var status = attributes.stat
                _ = fp_fuse_reply_attr(request, &status, session.options.attributeTimeout)
            } catch { FUSEOperations.fail(request, error) }
        }
        operations.setattr = { request, inode, attributes, toSet, file in
            let (session, requester) = FUSEOperations.context(request)
            guard let attributes else { return FUSEOperations.fail(request, .invalid) }
            let changes = FUSEOperations.changes(attributes.pointee, toSet)
            do throws(FUSEError) {
                let now = try session.fileSystem.setAttributes(
                    changes, of: inode, descriptor: FUSEOperations.descriptor(file), by: requester)
                var status = now.stat
                _ = fp_fuse_reply_attr(request, &status, session.options.attributeTimeout)
            } catch { FUSEOperations.fail(request, error) }
        }
        operations.readlink = { request, inode in
            let (session, requester) = FUSEOperations.context(request)
            do throws(FUSEError) {
                let target = try session.fileSystem.readLink(inode, by: requester)
                _ = (target + [0]).withUnsafeBufferPointer { bytes in
                    bytes.withMemoryRebound(to: CChar.self) { fp_fuse_reply_readlink(request, $0.baseAddress) }
                }
            } catch { FUSEOperations.fail(request, error) }
        }
        operations.mkdir = { request, parent, name, mode in
            let (session, requester) = FUSEOperations.context(request)
            guard let name else { return FUSEOperations.fail(request, .invalid) }
            do throws(FUSEError) {
                FUSEOperations.replyEntry(
                    request, try session.fileSystem.makeFolder(FUSEName(cString: name), in: parent, mode: mode, by: requester), session)
            } catch { FUSEOperations.fail(request, error) }
        }
        operations.symlink = { request, target, parent, name in
            let (session, requester) = FUSEOperations.context(request)
            guard let target, let name else { return FUSEOperations.fail(request, .invalid) }
            do throws(FUSEError) {
                let attributes = try session.fileSystem.makeSymbolicLink(
                    FUSEName(cString: name), in: parent, target: FUSEName(cString: target).bytes, by: requester)
                FUSEOperations.replyEntry(request, attributes, session)
            } catch { FUSEOperations.fail(request, error) }
        }
        operations.unlink = { request, parent, name in
            let (session, requester) = FUSEOperations.context(request)
            guard let name else { return FUSEOperations.fail(request, .invalid) }
            do throws(FUSEError) {
                try session.fileSystem.remove(FUSEName(cString: name), in: parent, by: requester)
                _ = fp_fuse_reply_err(request, 0)
            } catch { FUSEOperations.fail(request, error) }
        }
        operations.rmdir = { request, parent, name in
            let (session, requester) = FUSEOperations.context(request)
            guard let name else { return FUSEOperations.fail(request, .invalid) }
            do throws(FUSEError) {
                try session.fileSystem.removeFolder(FUSEName(cString: name), in: parent, by: requester)
                _ = fp_fuse_reply_err(request, 0)
            } catch { FUSEOperations.fail(request, error) }
        }
        operations.rename = { request, parent, name, newParent, newName, flags in
            let (session, requester) = FUSEOperations.context(request)
            guard let name, let newName else { return FUSEOperations.fail(request, .invalid) }
            do throws(FUSEError) {
                try session.fileSystem.rename(
                    FUSEName(cString: name), in: parent, to: FUSEName(cString: newName), in: newParent,
                    flags: FUSERenameFlags(rawValue: UInt32(flags)), by: requester)
                _ = fp_fuse_reply_err(request, 0)
            } catch { FUSEOperations.fail(request, error) }
        }
        operations.open = { request, inode, file in
            let (session, requester) = FUSEOperations.context(request)
            guard let file else { return FUSEOperations.fail(request, .invalid) }
            do throws(FUSEError) {
                let opened = try session.fileSystem.open(inode, flags: FUSEOperations.openFlags(file.pointee.flags, session), by: requester)
                FUSEOperations.describe(file, opened)
                if fp_fuse_reply_open(request, file) != 0 { FUSEOperations.abandon(inode, opened, session) }
            } catch { FUSEOperations.fail(request, error) }
        }
        operations.create = { request, parent, name, mode, file in
            let (session, requester) = FUSEOperations.context(request)
            guard let name, let file else { return FUSEOperations.fail(request, .invalid) }
            do throws(FUSEError) {
                let (attributes, opened) = try session.fileSystem.create(
                    FUSEName(cString: name), in: parent, mode: mode, flags: FUSEOperations.openFlags(file.pointee.flags, session),
                    by: requester)
                FUSEOperations.describe(file, opened)
                var entry = FUSEOperations.entryParameters(attributes, session)
                if fp_fuse_reply_create(request, &entry, file) != 0 { FUSEOperations.abandon(attributes.inode, opened, session) }
            } catch { FUSEOperations.fail(request, error) }
        }
        operations.read = { request, inode, count, offset, file in
            let (session, requester) = FUSEOperations.context(request)
            guard let descriptor = FUSEOperations.descriptor(file), offset >= 0 else { return FUSEOperations.fail(request, .invalid) }
            var answered = false
            do throws(FUSEError) {
                try session.fileSystem.read(inode, descriptor: descriptor, offset: UInt64(offset), count: count, by: requester) {
                    guard !answered else { return }
                    answered = true
                    _ = fp_fuse_reply_fd(request, descriptor, count, offset)
                }
                if !answered { _ = fp_fuse_reply_fd(request, descriptor, count, offset) }
            } catch {
                if !answered { FUSEOperations.fail(request, error) }
            }
        }
        operations.write = { request, inode, bytes, count, offset, file in
            let (session, requester) = FUSEOperations.context(request)
            guard let descriptor = FUSEOperations.descriptor(file), offset >= 0 else { return FUSEOperations.fail(request, .invalid) }
            do throws(FUSEError) {
                let written = try session.fileSystem.write(
                    inode, descriptor: descriptor, bytes: UnsafeRawBufferPointer(start: bytes, count: count), offset: UInt64(offset),
                    by: requester)
                _ = fp_fuse_reply_write(request, written)
            } catch { FUSEOperations.fail(request, error) }
        }
        operations.fsync = { request, inode, dataOnly, file in
            let (session, requester) = FUSEOperations.context(request)
            guard let descriptor = FUSEOperations.descriptor(file) else { return FUSEOperations.fail(request, .invalid) }
            do throws(FUSEError) {
                try session.fileSystem.synchronize(inode, descriptor: descriptor, dataOnly: dataOnly != 0, by: requester)
                _ = fp_fuse_reply_err(request, 0)
            } catch { FUSEOperations.fail(request, error) }
        }
        operations.release = { request, inode, file in
            let (session, _) = FUSEOperations.context(request)
            if let file, let descriptor = FUSEOperations.descriptor(file) {
                session.fileSystem.release(inode, descriptor: descriptor, flags: file.pointee.flags)
                close(descriptor)
            }
            _ = fp_fuse_reply_err(request, 0)
        }
        operations.opendir = { request, inode, file in
            let (session, requester) = FUSEOperations.context(request)
            guard let file else { return FUSEOperations.fail(request, .invalid) }
            do throws(FUSEError) {
                let opened = try session.fileSystem.openFolder(inode, by: requester)
                file.pointee.fh = FUSEOperations.folderHandle(opened.handle)
                file.pointee.cache_readdir = opened.keepsListing ? 1 : 0
                file.pointee.keep_cache = opened.keepsListing ? 1 : 0
                if fp_fuse_reply_open(request, file) != 0 { session.fileSystem.releaseFolder(inode, handle: opened.handle) }
            } catch { FUSEOperations.fail(request, error) }
        }
        operations.releasedir = { request, inode, file in
            let (session, _) = FUSEOperations.context(request)
            if let file { session.fileSystem.releaseFolder(inode, handle: FUSEOperations.folderHandle(of: file)) }
            _ = fp_fuse_reply_err(request, 0)
        }
        operations.readdir = { request, folder, size, offset, file in
            FUSEOperations.list(request, folder, FUSEOperations.folderHandle(of: file), size, offset, withAttributes: false)
        }
        operations.readdirplus = { request, folder, size, offset, file in
            FUSEOperations.list(request, folder, FUSEOperations.folderHandle(of: file), size, offset, withAttributes: true)
        }
        operations.statfs = { request, inode in
            let (session, requester) = FUSEOperations.context(request)
            do throws(FUSEError) {
                var statistics = try session.fileSystem.statistics(inode, by: requester).statvfs
                _ = fp_fuse_reply_statfs(request, &statistics)
            } catch { FUSEOperations.fail(request, error) }
        }
        operations.getxattr = { request, inode, name, size in
            let (session, requester) = FUSEOperations.context(request)
            guard let name else { return FUSEOperations.fail(request, .invalid) }
            do throws(FUSEError) {
                let value = try session.fileSystem.extendedAttribute(FUSEName(cString: name), of: inode, by: requester)
                FUSEOperations.replyAttributeBytes(request, value, capacity: size)
            } catch { FUSEOperations.fail(request, error) }
        }
        operations.listxattr = { request, inode, size in
            let (session, requester) = FUSEOperations.context(request)
            do throws(FUSEError) {
                let names = try session.fileSystem.extendedAttributeNames(of: inode, by: requester)
                FUSEOperations.replyAttributeBytes(request, names.flatMap { $0.bytes + [0] }, capacity: size)
            } catch { FUSEOperations.fail(request, error) }
        }
        operations.setxattr = { request, inode, name, value, size, flags in
            let (session, requester) = FUSEOperations.context(request)
            guard let name else { return FUSEOperations.fail(request, .invalid) }
            do throws(FUSEError) {
                try session.fileSystem.setExtendedAttribute(
                    FUSEName(cString: name), to: UnsafeRawBufferPointer(start: value, count: value == nil ? 0 : size),
                    flags: FUSEAttributeFlags(rawValue: flags & 3), of: inode, by: requester)
                _ = fp_fuse_reply_err(request, 0)
            } catch { FUSEOperations.fail(request, error) }
        }
        operations.removexattr = { request, inode, name in
            let (session, requester) = FUSEOperations.context(request)
            guard let name else { return FUSEOperations.fail(request, .invalid) }
            do throws(FUSEError) {
                try session.fileSystem.removeExtendedAttribute(FUSEName(cString: name), of: inode, by: requester)
                _ = fp_fuse_reply_err(request, 0)
            } catch { FUSEOperations.fail(request, error) }
        }
        return operations
    }

    /// The session a request is for, and who asks.
    static func context(_ request: fuse_req_t?) -> (FUSESession, FUSERequester) {
        let session = Unmanaged<FUSESession>.fromOpaque(fp_fuse_req_userdata(request)).takeUnretainedValue()
        var (pid, uid, gid, umask): (pid_t, uid_t, gid_t, mode_t) = (0, 0, 0, 0)
        fp_fuse_req_context(request, &pid, &uid, &gid, &umask)
        return (session, FUSERequester(processIdentifier: pid, userIdentifier: uid, groupIdentifier: gid, umask: umask))
    }

    static func fail(_ request: fuse_req_t?, _ error: FUSEError) {
        _ = fp_fuse_reply_err(request, error.code)
    }

    /// A getxattr or listxattr answer: the length alone when the program asked for it
    /// (`capacity` 0), ERANGE when `bytes` do not fit in `capacity`, else the bytes.
    static func replyAttributeBytes(_ request: fuse_req_t?, _ bytes: [UInt8], capacity: Int) {
        if capacity == 0 {
            _ = fp_fuse_reply_xattr(request, bytes.count)
        } else if bytes.count > capacity {
            fail(request, .range)
        } else {
            _ = bytes.withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) { fp_fuse_reply_buf(request, $0.baseAddress, $0.count) }
            }
        }
    }

    /// The `fh` of an open folder whose handle is `handle`.
    static func folderHandle(_ handle: UInt64) -> UInt64 { handle == 0 ? 0 : handle | (1 << 63) }

    /// The handle of the open folder `file` (0 for none).
    static func folderHandle(of file: UnsafeMutablePointer<fuse_file_info>?) -> UInt64 { (file?.pointee.fh ?? 0) & ~(1 << 63) }

    /// The backing descriptor of an open file (nil for none).
    static func descriptor(_ file: UnsafeMutablePointer<fuse_file_info>?) -> Int32? {
        guard let handle = file?.pointee.fh, handle > 0, handle <= UInt64(Int32.max) else { return nil }
        return Int32(handle - 1)
    }

    /// Open's flags as the file system sees them: with the writeback cache the kernel reads
    /// pages of files open for writing only and places appends itself.
    static func openFlags(_ flags: Int32, _ session: FUSESession) -> Int32 {
        guard session.writebackGranted.load(ordering: .sequentiallyConsistent) else { return flags }
        var result = flags & ~O_APPEND
        if result & O_ACCMODE == O_WRONLY { result = (result & ~O_ACCMODE) | O_RDWR }
        return result
    }

    static func describe(_ file: UnsafeMutablePointer<fuse_file_info>, _ opened: FUSEOpenFile) {
        file.pointee.fh = UInt64(opened.descriptor) + 1
        file.pointee.keep_cache = opened.isComplete ? 1 : 0
        file.pointee.direct_io = 0
    }

    /// An open whose reply the kernel did not take (the program was interrupted): no release
    /// will come for it.
    static func abandon(_ inode: UInt64, _ opened: FUSEOpenFile, _ session: FUSESession) {
        session.fileSystem.release(inode, descriptor: opened.descriptor, flags: 0)
        close(opened.descriptor)
    }

    static func entryParameters(_ attributes: FUSEAttributes, _ session: FUSESession) -> fuse_entry_param {
        var entry = fuse_entry_param()
        entry.ino = fuse_ino_t(attributes.inode)
        entry.generation = attributes.generation
        entry.attr = attributes.stat
        entry.attr_timeout = session.options.attributeTimeout
        entry.entry_timeout = session.options.entryTimeout
        return entry
    }

    static func replyEntry(_ request: fuse_req_t?, _ attributes: FUSEAttributes, _ session: FUSESession) {
        var entry = entryParameters(attributes, session)
        _ = fp_fuse_reply_entry(request, &entry)
    }

    /// What a setattr request changes.
    static func changes(_ attributes: stat, _ toSet: Int32) -> FUSEAttributeChanges {
        var changes = FUSEAttributeChanges()
        if toSet & fp_set_size != 0 { changes.size = UInt64(max(attributes.st_size, 0)) }
        if toSet & fp_set_mode != 0 { changes.mode = attributes.st_mode & 0o7777 }
        if toSet & fp_set_uid != 0 { changes.owner = attributes.st_uid }
        if toSet & fp_set_gid != 0 { changes.group = attributes.st_gid }
        if toSet & fp_set_atime_now != 0 {
            changes.accessTime = .now
        } else if toSet & fp_set_atime != 0 {
            changes.accessTime = .at(FUSETimestamp(attributes.st_atim))
        }
        if toSet & fp_set_mtime_now != 0 {
            changes.modificationTime = .now
        } else if toSet & fp_set_mtime != 0 {
            changes.modificationTime = .at(FUSETimestamp(attributes.st_mtim))
        }
        return changes
    }

    /// A readdir or readdirplus request: `.` (cookie 1), `..` (cookie 2), then the file
    /// system's entries (its cookies offset by 2). An error after some entries were added
    /// answers those (a listing with attributes has counted their lookups); the next request
    /// gets the error.
    static func list(
        _ request: fuse_req_t?, _ folder: fuse_ino_t, _ handle: UInt64, _ size: Int, _ offset: off_t, withAttributes: Bool
    ) {
        let (session, requester) = context(request)
        let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: max(size, 1))
        defer { buffer.deallocate() }
        var sink = FUSEListingSink(
            request: request, buffer: buffer, capacity: size, withAttributes: withAttributes, cookieBase: 2,
            entryTimeout: session.options.entryTimeout, attributeTimeout: session.options.attributeTimeout)
        var cookie = UInt64(max(offset, 0))
        var full = false
        if cookie == 0 {
            if sink.addDot(".", folder: folder, cookie: 1) { cookie = 1 } else { full = true }
        }
        if cookie == 1, !full {
            if sink.addDot("..", folder: folder, cookie: 2) { cookie = 2 } else { full = true }
        }
        if cookie >= 2, !full {
            do throws(FUSEError) {
                try session.fileSystem.list(folder, handle: handle, after: cookie - 2, into: &sink, by: requester)
            } catch {
                if sink.used == 0 { return fail(request, error) }
            }
        }
        _ = fp_fuse_reply_buf(request, buffer, sink.used)
    }
}
