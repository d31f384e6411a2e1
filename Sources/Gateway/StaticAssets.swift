import Crypto
import Foundation
import HTTP1
import Server
import WebAssets
import Wire

/// The browser side over HTTP (BX-3, BX-4): the client library at `/client/`, the console at
/// `/console/`, and the console's charting library from the operating system's package
/// (Debian's `libjs-chart.js`; no third-party code is in the repository). Files are read once at
/// start; each answer carries a strong `ETag` (a conditional GET gets 304) and `Cache-Control:
/// no-cache`, so browsers revalidate and never run a stale library.
struct StaticAssets: Sendable {
    struct Asset: Sendable {
        let path: String
        let body: [UInt8]
        let contentType: String
        let etag: String
        /// The client library may be imported by an app's pages on their own origin.
        let crossOrigin: Bool
        /// The console's pages: only the gateway itself may be reached from them.
        let isPage: Bool
    }

    /// Where Debian's libjs-chart.js puts its UMD build (the global `Chart`).
    static let defaultChartJSPath = "/usr/share/javascript/chart.js/chart.min.js"

    /// The console may load and connect to this server only (`'self'` covers its own ws/wss).
    static let contentSecurityPolicy =
        "default-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

    let assets: [Asset]

    /// Reads the files from `directory` (the build's resources, or a checkout's `clients/`
    /// given with `--assets-dir`); a missing file is left out (its path answers 404).
    init(directory: String?, chartJSPath: String?) {
        let dir = directory ?? WebAssets.directory
        func read(_ names: [String]) -> [UInt8]? {
            guard let dir else { return nil }
            for name in names {
                if let data = FileManager.default.contents(atPath: dir + "/" + name) { return Array(data) }
            }
            return nil
        }
        var list: [Asset] = []
        func add(_ path: String, _ names: [String], _ type: String, crossOrigin: Bool = false, page: Bool = false) {
            guard let body = read(names) else { return }
            list.append(Self.asset(path, body, type, crossOrigin: crossOrigin, page: page))
        }
        add("/client/roomcast.js", ["js/roomcast.js", "roomcast.js"], "text/javascript; charset=utf-8", crossOrigin: true)
        add("/client/roomcast.d.ts", ["js/roomcast.d.ts", "roomcast.d.ts"], "text/plain; charset=utf-8", crossOrigin: true)
        add("/console/", ["console/index.html"], "text/html; charset=utf-8", page: true)
        add("/console/console.js", ["console/console.js"], "text/javascript; charset=utf-8")
        add("/console/console.css", ["console/console.css"], "text/css; charset=utf-8")
        if let chartJSPath, let data = FileManager.default.contents(atPath: chartJSPath) {
            list.append(Self.asset("/console/vendor/chart.min.js", Array(data), "text/javascript; charset=utf-8", crossOrigin: false, page: false))
        }
        assets = list
    }

    static func asset(_ path: String, _ body: [UInt8], _ type: String, crossOrigin: Bool, page: Bool) -> Asset {
        let digest = SHA256.hash(data: body).prefix(12)
        return Asset(path: path, body: body, contentType: type, etag: "\"" + hexEncoded(Array(digest)) + "\"", crossOrigin: crossOrigin, isPage: page)
    }

    /// The answer to a GET (or HEAD) of `asset`: 304 when `If-None-Match` names its ETag.
    static func response(_ asset: Asset, _ request: Request) -> Response {
        var headers = HTTPHeaders()
        headers.add("ETag", asset.etag)
        headers.add("Cache-Control", "no-cache")
        headers.add("X-Content-Type-Options", "nosniff")
        if asset.crossOrigin { headers.add("Access-Control-Allow-Origin", "*") }
        if asset.isPage {
            headers.add("Content-Security-Policy", contentSecurityPolicy)
            headers.add("Referrer-Policy", "no-referrer")
            headers.add("X-Frame-Options", "DENY")
        }
        // Weak comparison (RFC 9110 §13.1.2): a `W/` tag matches its strong twin.
        if let tags = request.head.headers["if-none-match"], tags.split(separator: ",").contains(where: { tag in
            let t = tag.trimmingCharacters(in: .whitespaces)
            return t == "*" || (t.hasPrefix("W/") ? String(t.dropFirst(2)) : t) == asset.etag
        }) {
            return Response(status: HTTPStatus(code: 304), headers: headers, body: [])
        }
        headers.add("Content-Type", asset.contentType)
        return Response(status: .ok, headers: headers, body: asset.body)
    }

    /// Routes for every asset, and redirects from `/` and `/console` to the console.
    func register(_ r: inout Router.Builder) {
        for asset in assets {
            r.add(.GET, asset.path, sync: { req in Self.response(asset, req) })
        }
        guard assets.contains(where: { $0.path == "/console/" }) else { return }
        for from in ["/", "/console"] {
            r.add(.GET, from, sync: { _ in
                var headers = HTTPHeaders()
                headers.add("Location", "/console/")
                return Response(status: HTTPStatus(code: from == "/" ? 302 : 301), headers: headers, body: [])
            })
        }
    }
}
