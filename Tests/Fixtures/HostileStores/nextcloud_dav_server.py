#!/usr/bin/env python3
"""An emulation of the subset of Nextcloud's WebDAV dialect the `webdav` adapter speaks with
`--vendor nextcloud`, for tests only: it is not Nextcloud, and it follows Nextcloud's documented
behaviour (and the behaviour of its Sabre/DAV core) as far as this subset goes.

  * files under /remote.php/dav/files/<user>/, a folder on disk;
  * PROPFIND Depth 0/1 with DAV: properties and oc:fileid (a number that stays with an item
    across MOVE) and oc:checksums;
  * GET (with Range) sending OC-Checksum when the upload gave one, and OC-FileId;
  * PUT with If-Match / If-None-Match: *, verifying OC-Checksum: SHA1:<hex> or SHA256:<hex>
    and keeping it (every PUT's and MOVE's OC-Checksum is logged to checksums.log);
    a mismatch is answered as ownCloud 10 and ownCloud Infinite Scale answer it (400 with
    Sabre's BadRequest error body; Nextcloud itself stores the header unchecked); MKCOL; MOVE with Destination, Overwrite and If-Match; DELETE with
    If-Match;
  * chunked upload v2: MKCOL /remote.php/dav/uploads/<user>/<id>, PUT of numbered chunks, MOVE
    of <id>/.file to the destination (with OC-Total-Length), which assembles them.

Faults for tests are chosen with --fault: `bad-checksum` sends a wrong OC-Checksum on GET (of
the algorithm the upload gave, SHA1 when it gave none);
`bad-fileid` lists one entry with a hostile oc:fileid; `corrupt-upload` changes the last byte of
every upload as it arrives (before the OC-Checksum check).

    nextcloud_dav_server.py --root DIR --port N [--user NAME --password PW] [--fault F]
"""

import argparse
import base64
import email.utils
import hashlib
import itertools
import os
import shutil
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from xml.etree import ElementTree

LOCK = threading.RLock()
IDS = {}  # relative path ('' for the root, 'a/b') -> fileid
ETAGS = {}  # fileid -> etag (quoted)
CHECKSUMS = {}  # fileid -> 'SHA1:<hex>' or 'SHA256:<hex>' given at upload
DIGESTS = {"SHA1": hashlib.sha1, "SHA256": hashlib.sha256}
# Sabre/DAV's error body for the BadRequest ownCloud throws on an OC-Checksum mismatch.
CHECKSUM_MISMATCH = (
    b'<?xml version="1.0" encoding="utf-8"?>\n'
    b'<d:error xmlns:d="DAV:" xmlns:s="http://sabredav.org/ns">\n'
    b'  <s:exception>Sabre\\DAV\\Exception\\BadRequest</s:exception>\n'
    b'  <s:message>The computed checksum does not match the one received from the client.</s:message>\n'
    b'</d:error>\n'
)
COUNTER = itertools.count(100)
ARGS = None


def new_etag():
    return '"%x"' % next(COUNTER)


def fileid(rel):
    if rel not in IDS:
        IDS[rel] = str(next(COUNTER))
        ETAGS[IDS[rel]] = new_etag()
    return IDS[rel]


def forget(rel):
    for key in [k for k in IDS if k == rel or k.startswith(rel + "/")]:
        ident = IDS.pop(key)
        ETAGS.pop(ident, None)
        CHECKSUMS.pop(ident, None)


def carry(source, target):
    for key in [k for k in IDS if k == source or k.startswith(source + "/")]:
        IDS[target + key[len(source):]] = IDS.pop(key)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    # ---- helpers

    def reply(self, status, body=b"", headers=None):
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def authorized(self):
        if not ARGS.password:
            return True
        expected = base64.b64encode(("%s:%s" % (ARGS.user, ARGS.password)).encode()).decode()
        if self.headers.get("Authorization") == "Basic " + expected:
            return True
        self.body()
        self.reply(401, b"", {"WWW-Authenticate": 'Basic realm="Nextcloud"'})
        return False

    def files_prefix(self):
        return "/remote.php/dav/files/%s" % (ARGS.user or "alice")

    def uploads_prefix(self):
        return "/remote.php/dav/uploads/%s" % (ARGS.user or "alice")

    def relative(self, url_path):
        """The path inside the files root ('' for the root), or None."""
        path = urllib.parse.urlsplit(url_path).path
        prefix = self.files_prefix()
        if path.rstrip("/") == prefix:
            return ""
        if not path.startswith(prefix + "/"):
            return None
        names = [urllib.parse.unquote(part, errors="strict") for part in path[len(prefix) + 1:].split("/") if part]
        if any(name in (".", "..") or "\0" in name or "/" in name for name in names):
            return None
        return "/".join(names)

    def disk(self, rel):
        return os.path.join(ARGS.root, rel) if rel else ARGS.root

    def href(self, rel, folder):
        quoted = urllib.parse.quote(rel, safe="/")
        text = self.files_prefix() + ("/" + quoted if rel else "")
        return text + ("/" if folder else "")

    def precondition(self, rel):
        """412 for If-Match / If-None-Match that do not hold; None when they hold."""
        exists = os.path.exists(self.disk(rel))
        match = self.headers.get("If-Match")
        if match is not None:
            if not exists or os.path.isdir(self.disk(rel)) or ETAGS.get(fileid(rel)) != match.strip():
                return 412
        none_match = self.headers.get("If-None-Match")
        if none_match is not None and none_match.strip() == "*" and exists:
            return 412
        return None

    # ---- methods

    def do_OPTIONS(self):
        self.body()
        self.reply(200, b"", {"DAV": "1, 3", "Allow": "OPTIONS, GET, HEAD, PUT, DELETE, MKCOL, MOVE, PROPFIND"})

    def do_PROPFIND(self):
        if not self.authorized():
            return
        self.body()
        with LOCK:
            rel = self.relative(self.path)
            if rel is None or not os.path.exists(self.disk(rel)):
                return self.reply(404)
            entries = [rel]
            if self.headers.get("Depth", "1") != "0" and os.path.isdir(self.disk(rel)):
                entries += [(rel + "/" + name) if rel else name for name in sorted(os.listdir(self.disk(rel)))]
            parts = ['<?xml version="1.0"?><d:multistatus xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns">']
            for index, entry in enumerate(entries):
                parts.append(self.response(entry, hostile=ARGS.fault == "bad-fileid" and index == 1))
            parts.append("</d:multistatus>")
        self.reply(207, "".join(parts).encode(), {"Content-Type": "application/xml; charset=utf-8"})

    def response(self, rel, hostile=False):
        path = self.disk(rel)
        info = os.stat(path)
        folder = os.path.isdir(path)
        ident = fileid(rel)
        shown = "../../etc" if hostile else ident
        props = ["<oc:fileid>%s</oc:fileid>" % shown]
        props.append("<d:getlastmodified>%s</d:getlastmodified>" % email.utils.formatdate(info.st_mtime, usegmt=True))
        if folder:
            props.append("<d:resourcetype><d:collection/></d:resourcetype>")
            props.append("<d:quota-available-bytes>-3</d:quota-available-bytes>")
        else:
            props.append("<d:resourcetype/>")
            props.append("<d:getcontentlength>%d</d:getcontentlength>" % info.st_size)
            props.append("<d:getetag>%s</d:getetag>" % ETAGS[ident])
            props.append("<d:getcontenttype>application/octet-stream</d:getcontenttype>")
            if ident in CHECKSUMS:
                props.append("<oc:checksums><oc:checksum>%s</oc:checksum></oc:checksums>" % CHECKSUMS[ident])
        missing = "<d:prop><d:creationdate/></d:prop><d:status>HTTP/1.1 404 Not Found</d:status>"
        return "<d:response><d:href>%s</d:href><d:propstat><d:prop>%s</d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat><d:propstat>%s</d:propstat></d:response>" % (
            self.href(rel, folder), "".join(props), missing)

    def do_GET(self):
        if not self.authorized():
            return
        with LOCK:
            rel = self.relative(self.path)
            if rel is None or not os.path.exists(self.disk(rel)):
                return self.reply(404)
            if os.path.isdir(self.disk(rel)):
                return self.reply(405, b"", {"Allow": "PROPFIND, MKCOL, DELETE, MOVE"})
            with open(self.disk(rel), "rb") as handle:
                data = handle.read()
            ident = fileid(rel)
            info = os.stat(self.disk(rel))
            headers = {"ETag": ETAGS[ident], "OC-FileId": ident, "Accept-Ranges": "bytes",
                       "Last-Modified": email.utils.formatdate(info.st_mtime, usegmt=True)}
            if ident in CHECKSUMS:
                headers["OC-Checksum"] = CHECKSUMS[ident]
            if ARGS.fault == "bad-checksum":
                algorithm = CHECKSUMS.get(ident, "SHA1:").partition(":")[0]
                headers["OC-Checksum"] = algorithm + ":" + DIGESTS[algorithm](data + b"x").hexdigest()
        wanted = self.headers.get("Range")
        if wanted and wanted.startswith("bytes="):
            first, _, last = wanted[6:].partition("-")
            start = int(first)
            end = min(int(last), len(data) - 1) if last else len(data) - 1
            if start >= len(data):
                return self.reply(416, b"", {"Content-Range": "bytes */%d" % len(data)})
            headers["Content-Range"] = "bytes %d-%d/%d" % (start, end, len(data))
            return self.reply(206, data[start:end + 1], headers)
        self.reply(200, data, headers)

    def do_PUT(self):
        if not self.authorized():
            return
        data = self.body()
        path = urllib.parse.urlsplit(self.path).path
        with LOCK:
            if path.startswith(self.uploads_prefix() + "/"):
                chunk = os.path.join(ARGS.uploads, *[urllib.parse.unquote(p) for p in path[len(self.uploads_prefix()) + 1:].split("/")])
                if not os.path.isdir(os.path.dirname(chunk)):
                    return self.reply(404)
                with open(chunk, "wb") as handle:
                    handle.write(data)
                return self.reply(201)
            rel = self.relative(self.path)
            if rel is None or rel == "":
                return self.reply(403)
            if not os.path.isdir(os.path.dirname(self.disk(rel))):
                return self.reply(409)
            if os.path.isdir(self.disk(rel)):
                return self.reply(405)
            failed = self.precondition(rel)
            if failed:
                return self.reply(failed)
            return self.store(rel, data, self.headers.get("OC-Checksum"))

    def store(self, rel, data, checksum):
        if ARGS.fault == "corrupt-upload" and data:
            data = data[:-1] + bytes([data[-1] ^ 0xFF])
        if checksum:
            with open(os.path.join(os.path.dirname(ARGS.uploads.rstrip("/")), "checksums.log"), "a") as log:
                log.write("%s %s\n" % (urllib.parse.quote(rel), checksum))
            algorithm, _, value = checksum.partition(":")
            algorithm = algorithm.upper()
            if algorithm not in DIGESTS or DIGESTS[algorithm](data).hexdigest() != value.lower():
                return self.reply(400, CHECKSUM_MISMATCH, {"Content-Type": "application/xml; charset=utf-8"})
        existed = os.path.exists(self.disk(rel))
        with open(self.disk(rel), "wb") as handle:
            handle.write(data)
        ident = fileid(rel)
        ETAGS[ident] = new_etag()
        if checksum:
            CHECKSUMS[ident] = algorithm + ":" + value.lower()
        else:
            CHECKSUMS.pop(ident, None)
        self.reply(204 if existed else 201, b"", {"ETag": ETAGS[ident], "OC-ETag": ETAGS[ident], "OC-FileId": ident})

    def do_MKCOL(self):
        if not self.authorized():
            return
        self.body()
        path = urllib.parse.urlsplit(self.path).path
        with LOCK:
            if path.startswith(self.uploads_prefix() + "/"):
                name = urllib.parse.unquote(path[len(self.uploads_prefix()) + 1:].strip("/"))
                if not name or "/" in name or name in (".", ".."):
                    return self.reply(400)
                os.makedirs(os.path.join(ARGS.uploads, name), exist_ok=True)
                return self.reply(201)
            rel = self.relative(self.path)
            if rel is None or rel == "":
                return self.reply(405)
            if os.path.exists(self.disk(rel)):
                return self.reply(405)
            if not os.path.isdir(os.path.dirname(self.disk(rel))):
                return self.reply(409)
            os.mkdir(self.disk(rel))
            fileid(rel)
            self.reply(201)

    def do_MOVE(self):
        if not self.authorized():
            return
        self.body()
        path = urllib.parse.urlsplit(self.path).path
        target = self.relative(self.headers.get("Destination", ""))
        with LOCK:
            if target is None or target == "":
                return self.reply(403)
            if path.startswith(self.uploads_prefix() + "/") and path.rstrip("/").endswith("/.file"):
                return self.assemble(path, target)
            rel = self.relative(self.path)
            if rel is None or rel == "" or not os.path.exists(self.disk(rel)):
                return self.reply(404)
            if target == rel or target.startswith(rel + "/"):
                return self.reply(403)
            if self.headers.get("If-Match") is not None and self.precondition(rel):
                return self.reply(412)
            if not os.path.isdir(os.path.dirname(self.disk(target))):
                return self.reply(409)
            existed = os.path.exists(self.disk(target))
            if existed:
                if self.headers.get("Overwrite", "T").upper() == "F":
                    return self.reply(412)
                forget(target)
                if os.path.isdir(self.disk(target)):
                    shutil.rmtree(self.disk(target))
                else:
                    os.remove(self.disk(target))
            os.rename(self.disk(rel), self.disk(target))
            carry(rel, target)
            self.reply(204 if existed else 201)

    def assemble(self, path, target):
        name = urllib.parse.unquote(path[len(self.uploads_prefix()) + 1:].rstrip("/")[:-len("/.file")])
        folder = os.path.join(ARGS.uploads, name)
        if not os.path.isdir(folder):
            return self.reply(404)
        if not os.path.isdir(os.path.dirname(self.disk(target))):
            return self.reply(409)
        if os.path.isdir(self.disk(target)):
            return self.reply(405)
        failed = self.precondition(target)
        if failed:
            return self.reply(failed)
        chunks = sorted(os.listdir(folder))
        data = b"".join(open(os.path.join(folder, chunk), "rb").read() for chunk in chunks)
        total = self.headers.get("OC-Total-Length")
        if total is not None and int(total) != len(data):
            return self.reply(400, b"the chunks do not add up to OC-Total-Length")
        shutil.rmtree(folder)
        with open(ARGS.uploads.rstrip("/") + ".log", "a") as log:
            log.write("%s %d\n" % (urllib.parse.quote(target), len(chunks)))
        return self.store(target, data, self.headers.get("OC-Checksum"))

    def do_DELETE(self):
        if not self.authorized():
            return
        self.body()
        path = urllib.parse.urlsplit(self.path).path
        with LOCK:
            if path.startswith(self.uploads_prefix() + "/"):
                shutil.rmtree(os.path.join(ARGS.uploads, urllib.parse.unquote(path[len(self.uploads_prefix()) + 1:].strip("/"))),
                              ignore_errors=True)
                return self.reply(204)
            rel = self.relative(self.path)
            if rel is None or rel == "":
                return self.reply(403)
            if not os.path.exists(self.disk(rel)):
                return self.reply(404)
            if self.headers.get("If-Match") is not None and self.precondition(rel):
                return self.reply(412)
            if os.path.isdir(self.disk(rel)):
                shutil.rmtree(self.disk(rel))
            else:
                os.remove(self.disk(rel))
            forget(rel)
            self.reply(204)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--uploads")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--user")
    parser.add_argument("--password")
    parser.add_argument("--fault")
    ARGS = parser.parse_args()
    ARGS.uploads = ARGS.uploads or ARGS.root.rstrip("/") + "-uploads"
    os.makedirs(ARGS.uploads, exist_ok=True)
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
