#!/usr/bin/env python3
"""A hostile SFTP server for tests: it answers anything, on purpose wrongly.

Started by the tests (Sources/ProviderTesting/HostileSFTPServer.swift) on 127.0.0.1 and a
free port, stopped by pid. Written with paramiko (installed by scripts/install-deps.sh), which
lets a server send any attribute value: sizes are uint64 and times uint32 on the wire.

    hostile_sftp_server.py PORT HOST_KEY

Every login with any public key is accepted, except as the user "password": that user signs in
with the password "sftp pw" only (the tests of where a domain's password comes from). A login
as the user "limits" is answered as
OpenSSH answers: the VERSION reply offers limits@openssh.com (reads of up to 64 KiB), so the
client reads over its own SFTP channel instead of libssh2's. The tree, below any root path:

    good.txt   5 bytes "hello"
    epoch.txt  3 bytes, modified at 0 (1970)
    late.txt   3 bytes, modified at 2^32-1 (2106)
    huge.bin   size 2^64-1 (read back as -1 when truncated to Int64)
    big.bin    size 2^63
    short.bin  says 100 bytes, sends 40 and then EOF
    long.bin   says 10 bytes, answers every read with 20 bytes more than asked
    reset.bin  1 MiB of "r", not listed; a read past its first 256 KiB resets the connection
    loop/      a folder whose listing holds loop/ again, forever (loop/loop/loop/...),
               and leaf.txt (1 byte)
    liar/      a folder whose READDIR reply says 5 names and holds 1

Below the root path /endless instead, the root folder's listing never ends: every READDIR is
answered with the same 2,000 names again, never with EOF.

Below the root path /gated, the tree is one file that stalls halfway:

    gated.bin  8 MiB, byte i is i % 251; a read of bytes past its first 4 MiB waits until the
               file "open-gate" exists in the folder of HOST_KEY (what the test creates to let
               the rest come)
"""

import os
import socket
import sys
import threading
import time

import struct

import paramiko
from paramiko.message import Message
from paramiko.sftp import CMD_EXTENDED, CMD_EXTENDED_REPLY, CMD_INIT, CMD_NAME, CMD_VERSION, SFTP_EOF, SFTPError
from paramiko.sftp_attr import SFTPAttributes

# The user who signs in with this password only (no key).
PASSWORD_USER = "password"
PASSWORD = "sftp pw"

FILE = 0o100644
FOLDER = 0o040755
MTIME = 1_700_000_000

# name -> (mode, announced size, mtime, bytes served, extra bytes per read)
FILES = {
    "good.txt": (FILE, 5, MTIME, b"hello", 0),
    "epoch.txt": (FILE, 3, 0, b"abc", 0),
    "late.txt": (FILE, 3, 2**32 - 1, b"xyz", 0),
    "huge.bin": (FILE, 2**64 - 1, MTIME, b"h" * 64, 0),
    "big.bin": (FILE, 2**63, MTIME, b"b" * 64, 0),
    "short.bin": (FILE, 100, MTIME, b"s" * 40, 0),
    "long.bin": (FILE, 10, MTIME, b"l" * 10, 20),
    "reset.bin": (FILE, 1 << 20, MTIME, b"r" * (1 << 20), 0),
    "leaf.txt": (FILE, 1, MTIME, b"L", 0),
    "loop": (FOLDER, 0, MTIME, b"", 0),
    "liar": (FOLDER, 0, MTIME, b"", 0),
}
GATED_SIZE = 8 << 20
GATED_OPEN_AFTER = 4 << 20
# Byte i is i % 251: 251 bytes repeated (a generator over 8 Mi bytes took 0.23 s at every start).
GATED = (FILE, GATED_SIZE, MTIME, (bytes(range(251)) * (GATED_SIZE // 251 + 1))[:GATED_SIZE], 0)
# Set by main(): the file whose existence lets reads past GATED_OPEN_AFTER go on.
GATE_PATH = None

# reset.bin is not listed (a sync would trip over it), only there when asked for.
ROOT_NAMES = [n for n in sorted(FILES) if n not in ("leaf.txt", "reset.bin")]


def endless_batch(count=2000):
    """The body of a NAME reply after its request id: `count` file names and attributes."""
    message = paramiko.Message()
    message.add_int(count)
    for index in range(count):
        attr = SFTPAttributes()
        attr.filename = "n%06d" % index
        attr.st_size = 1
        attr.st_mode = FILE
        attr.st_uid = attr.st_gid = 0
        attr.st_atime = attr.st_mtime = MTIME
        message.add_string(attr.filename)
        message.add_string(attr.filename)
        attr._pack(message)
    return message.asbytes()


ENDLESS_BATCH = endless_batch()


def describe(path):
    """(entry, listing names or None) of a path, or None when nothing is there. The root is
    "/" or "/data"; loop/ holds loop/ again at any depth."""
    parts = [p for p in path.split("/") if p and p != "."]
    if parts == ["endless"]:
        return (FOLDER, 0, MTIME, b"", 0), []
    if parts == ["gated"]:
        return (FOLDER, 0, MTIME, b"", 0), ["gated.bin"]
    if parts == ["gated", "gated.bin"]:
        return GATED, None
    if parts[:1] == ["data"]:
        parts = parts[1:]
    if not parts:
        return (FOLDER, 0, MTIME, b"", 0), ROOT_NAMES
    name, above = parts[-1], parts[:-1]
    if any(p != "loop" for p in above):
        return None
    if above and name not in ("loop", "leaf.txt"):
        return None
    if not above and name == "leaf.txt":
        return None
    entry = FILES.get(name)
    if entry is None:
        return None
    if name == "loop":
        return entry, ["leaf.txt", "loop"]
    if name == "liar":
        return entry, ["good.txt"]
    return entry, None


def attributes(name, entry):
    mode, size, mtime, _, _ = entry
    attr = SFTPAttributes()
    attr.filename = name
    attr.st_mode = mode
    attr.st_size = size
    attr.st_uid = 0
    attr.st_gid = 0
    attr.st_atime = mtime
    attr.st_mtime = mtime
    return attr


RESET_AFTER = 256 * 1024


class Handle(paramiko.SFTPHandle):
    def __init__(self, name, entry, ssh_server):
        super().__init__()
        self.name = name
        self.entry = entry
        self.ssh_server = ssh_server

    def stat(self):
        return attributes(self.name, self.entry)

    def read(self, offset, length):
        _, _, _, data, extra = self.entry
        if self.name == "reset.bin" and offset + length > RESET_AFTER:
            self.ssh_server.reset()
            return paramiko.SFTP_FAILURE
        if self.entry is GATED and offset + length > GATED_OPEN_AFTER:
            # Polls a file the test creates: nothing else can signal this process.
            while not os.path.exists(GATE_PATH):
                time.sleep(0.05)
        if offset >= len(data):
            return SFTP_EOF
        return data[offset:offset + length] + b"x" * extra


class Interface(paramiko.SFTPServerInterface):
    def __init__(self, server, *args, **kwargs):
        super().__init__(server, *args, **kwargs)
        self.ssh_server = server
    def canonicalize(self, path):
        return "/" + "/".join(p for p in path.split("/") if p and p != ".")

    def _lookup(self, path):
        return describe(path)

    def stat(self, path):
        found = self._lookup(path)
        if found is None:
            return paramiko.SFTP_NO_SUCH_FILE
        name = path.rstrip("/").split("/")[-1] or "/"
        return attributes(name, found[0])

    lstat = stat

    def list_folder(self, path):
        found = self._lookup(path)
        if found is None:
            return paramiko.SFTP_NO_SUCH_FILE
        entry, names = found
        if names is None:
            return paramiko.SFTP_FAILURE
        return [attributes(n, GATED if n == "gated.bin" else FILES[n]) for n in names]

    def open(self, path, flags, attr):
        found = self._lookup(path)
        if found is None:
            return paramiko.SFTP_NO_SUCH_FILE
        if flags & (os.O_WRONLY | os.O_RDWR):
            return paramiko.SFTP_PERMISSION_DENIED
        name = path.rstrip("/").split("/")[-1]
        return Handle(name, found[0], self.ssh_server)

    def readlink(self, path):
        return paramiko.SFTP_NO_SUCH_FILE


class LyingServer(paramiko.SFTPServer):
    """Sends a READDIR reply for liar/ that claims more names than it holds; offers and answers
    limits@openssh.com to the user "limits"."""

    def _offers_limits(self):
        return getattr(self.get_server(), "username", "") == "limits"

    def _send_server_version(self):
        if not self._offers_limits():
            return super()._send_server_version()
        t, data = self._read_packet()
        if t != CMD_INIT:
            raise SFTPError("Incompatible sftp protocol")
        message = Message()
        message.add_int(3)
        message.add("limits@openssh.com", "1")
        self._send_packet(CMD_VERSION, message)
        return struct.unpack(">I", data[:4])[0]

    def _process(self, t, request_number, msg):
        if t == CMD_EXTENDED and self._offers_limits():
            tag = msg.get_text()
            if tag == "limits@openssh.com":
                reply = Message()
                reply.add_int(request_number)
                for limit in (256 * 1024 + 1024, 64 * 1024, 64 * 1024, 64):
                    reply.add_int64(limit)
                self._send_packet(CMD_EXTENDED_REPLY, reply)
                return
            msg.rewind()
            msg.get_int()
        return super()._process(t, request_number, msg)

    def _open_folder(self, request_number, path):
        listing = self.server.list_folder(path)
        if not isinstance(listing, list):
            self._send_status(request_number, listing)
            return
        folder = paramiko.SFTPHandle()
        folder._set_files(listing)
        folder.hostile_lies = path.rstrip("/").endswith("/liar")
        folder.hostile_endless = path.rstrip("/") == "/endless"
        self._send_handle_response(request_number, folder, True)

    def _read_folder(self, request_number, folder):
        if getattr(folder, "hostile_endless", False):
            message = paramiko.Message()
            message.add_int(request_number)
            message.add_bytes(ENDLESS_BATCH)
            self._send_packet(CMD_NAME, message)
            return
        names = folder._get_next_files()
        if len(names) == 0:
            self._send_status(request_number, SFTP_EOF)
            return
        message = paramiko.Message()
        message.add_int(request_number)
        message.add_int(len(names) + 4 if getattr(folder, "hostile_lies", False) else len(names))
        for attr in names:
            message.add_string(attr.filename)
            message.add_string(attr.filename)
            attr._pack(message)
        self._send_packet(CMD_NAME, message)


class Server(paramiko.ServerInterface):
    def __init__(self, client):
        self.client = client
        self.username = ""

    def reset(self):
        """Drops the connection at once, with a TCP reset."""
        try:
            self.client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.client.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def check_auth_publickey(self, username, key):
        if username == PASSWORD_USER:
            return paramiko.AUTH_FAILED
        self.username = username
        return paramiko.AUTH_SUCCESSFUL

    def check_auth_password(self, username, password):
        if username == PASSWORD_USER and password != PASSWORD:
            return paramiko.AUTH_FAILED
        self.username = username
        return paramiko.AUTH_SUCCESSFUL

    def get_allowed_auths(self, username):
        return "publickey,password"

    def check_channel_request(self, kind, chanid):
        return paramiko.OPEN_SUCCEEDED if kind == "session" else paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_subsystem_request(self, channel, name):
        return super().check_channel_subsystem_request(channel, name)


def serve(client, host_key):
    try:
        transport = paramiko.Transport(client)
        transport.add_server_key(host_key)
        transport.set_subsystem_handler("sftp", LyingServer, Interface)
        transport.start_server(server=Server(client))
        while transport.is_active():
            transport.join(1)
    except Exception:
        pass


def exit_with_parent():
    """Ends the server when the test process that started it is gone (killed, say), so no
    server outlives its tests."""
    parent = os.getppid()
    while os.getppid() == parent:
        threading.Event().wait(1)
    os._exit(0)


def main():
    global GATE_PATH
    threading.Thread(target=exit_with_parent, daemon=True).start()
    port = int(sys.argv[1])
    GATE_PATH = os.path.join(os.path.dirname(os.path.abspath(sys.argv[2])), "open-gate")
    host_key = paramiko.Ed25519Key.from_private_key_file(sys.argv[2])
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    # What the test waits for: this process, not another, holds the port.
    print(f"listening on {port}", flush=True)
    while True:
        client, _ = listener.accept()
        threading.Thread(target=serve, args=(client, host_key), daemon=True).start()


if __name__ == "__main__":
    main()
