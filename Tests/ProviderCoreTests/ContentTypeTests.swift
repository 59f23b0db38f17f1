import ProviderCore
import Testing

@Suite struct ContentTypeTests {
    @Test(arguments: [
        ("photo.jpg", "public.jpeg"), ("PHOTO.JPEG", "public.jpeg"), ("notes.Md", "net.daringfireball.markdown"),
        ("a.b.c.json", "public.json"), ("archive.tar.zip", "public.zip-archive"), ("noextension", "public.data"),
        (".hidden", "public.data"), (".hidden.png", "public.png"), ("trailingdot.", "public.data"),
        ("long.extension", "public.data"), ("main.swift", "public.swift-source"), ("x.c", "public.c-source"),
        ("résumé.pdf", "com.adobe.pdf"), ("photo.JPG", "public.jpeg"), ("café.jpé", "public.data"),
        ("naïve.\u{301}png", "public.data"), ("\u{600}.png", "public.data"), ("file.mp4\u{301}", "public.data"),
    ])
    func aFilesTypeComesFromItsExtension(_ name: String, _ type: String) {
        #expect(ContentType.guess(filename: name, kind: .file) == type)
    }

    @Test func foldersAndSymlinksHaveTheirOwnTypes() {
        #expect(ContentType.guess(filename: "x.jpg", kind: .folder) == ContentType.folder)
        #expect(ContentType.guess(filename: "x.jpg", kind: .symlink) == ContentType.symlink)
    }
}
