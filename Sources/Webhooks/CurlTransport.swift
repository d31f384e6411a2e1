import CCurl
import Foundation
import Reactor
#if canImport(Glibc)
import Glibc
#endif

/// One HTTP POST to make.
struct TransferJob: Sendable {
    var tag: Int
    var url: String
    var headers: [(String, String)]
    var body: [UInt8]
    var allowPrivateNetwork: Bool
    var timeoutMs: Int
    var connectTimeoutMs: Int
}

struct TransferResult: Equatable, Sendable {
    /// The HTTP status; 0 when no response arrived.
    var status: Int
    /// Why there was no usable response ("" when there was one).
    var error: String
    var durationMs: Int64
    /// The start of the response body (at most `maxResponseBytes`).
    var responsePrefix: [UInt8]
}

/// The state of one transfer that curl's callbacks reach through their user pointer.
final class Transfer {
    let job: TransferJob
    let started: Instant
    var response: [UInt8] = []
    var responseSeen = 0
    var refused: AddressClass?
    var headerList: UnsafeMutablePointer<curl_slist>?
    let maxResponseBytes: Int
    let abortAfterBytes: Int

    init(job: TransferJob, maxResponseBytes: Int, abortAfterBytes: Int) {
        self.job = job
        self.maxResponseBytes = maxResponseBytes
        self.abortAfterBytes = abortAfterBytes
        started = Instant.now()
    }
}

/// libcurl's multi interface driven by one thread: many transfers in flight, connections reused
/// across them, no redirects, no proxies, connect and total timeouts, response bodies read only up
/// to a small cap, and the egress policy checked on real addresses, after name resolution, twice:
///
/// - when a connection is opened (the open-socket callback): a refused address is never even
///   connected to, so DNS cannot smuggle a private target in;
/// - for every transfer, on the connection it is about to use, new or reused, before a byte of the
///   request is sent (the pre-request callback, with the connection's peer address). The connection
///   cache is shared by every endpoint of every app: without this, a connection opened for an
///   endpoint that may reach private addresses would carry another endpoint's request to the same
///   host and port unchecked. Checking each transfer does not depend on how libcurl matches
///   connections (host and port, TLS, HTTP/2 multiplexing), and keeps reuse for everything allowed.
final class CurlTransport {
    // Confined to the thread that created it; only `CurlTransport.wakeup` may be called elsewhere.
    private let multi: UnsafeMutableRawPointer
    private var active: [UnsafeMutableRawPointer: Transfer] = [:]
    private var idle: [UnsafeMutableRawPointer] = []
    let maxResponseBytes: Int
    let abortAfterBytes: Int
    let userAgent: String

    /// curl_global_init, once per process (a static `let` initialiser runs exactly once).
    private static let globalInit: Void = { _ = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

    /// `maxConnections`: open connections in all (0: no limit); transfers past it wait for one.
    init(maxResponseBytes: Int = 1024, abortAfterBytes: Int = 64 * 1024, maxConnectionsPerHost: Int = 32, maxConnections: Int = 0,
         userAgent: String = "Roomcast-Webhooks/1") {
        _ = Self.globalInit
        multi = curl_multi_init()
        self.maxResponseBytes = maxResponseBytes
        self.abortAfterBytes = abortAfterBytes
        self.userAgent = userAgent
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, maxConnectionsPerHost)
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, max(64, maxConnectionsPerHost * 4))
        if maxConnections > 0 { _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, maxConnections) }
    }

    deinit {
        for (easy, t) in active {
            curl_multi_remove_handle(multi, easy)
            curl_slist_free_all(t.headerList)
            Unmanaged.passUnretained(t).release()
            curl_easy_cleanup(easy)
        }
        for e in idle { curl_easy_cleanup(e) }
        curl_multi_cleanup(multi)
    }

    var inFlight: Int { active.count }

    /// The multi handle, for `wakeup` from other threads.
    var handle: UnsafeMutableRawPointer { multi }

    /// Wakes a `poll` in progress (thread-safe in libcurl 7.68 and later).
    static func wakeup(_ multi: UnsafeMutableRawPointer) { curl_multi_wakeup(multi) }

    func start(_ job: TransferJob) {
        let easy = idle.popLast() ?? curl_easy_init()!
        let t = Transfer(job: job, maxResponseBytes: maxResponseBytes, abortAfterBytes: abortAfterBytes)
        let ctx = Unmanaged.passRetained(t).toOpaque()
        _ = ccurl_easy_setopt_str(easy, CURLOPT_URL, job.url)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 0)
        _ = ccurl_easy_setopt_str(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        _ = ccurl_easy_setopt_str(easy, CURLOPT_NOPROXY, "*")
        _ = ccurl_easy_setopt_str(easy, CURLOPT_USERAGENT, userAgent)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, job.connectTimeoutMs)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, job.timeoutMs)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_TCP_NODELAY, 1)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_POST, 1)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_POSTFIELDSIZE, job.body.count)
        if job.body.isEmpty {
            _ = ccurl_easy_setopt_str(easy, CURLOPT_COPYPOSTFIELDS, "")
        } else {
            job.body.withUnsafeBufferPointer { p in _ = ccurl_easy_setopt_ptr(easy, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: p.baseAddress!)) }
        }
        var list: UnsafeMutablePointer<curl_slist>?
        for (k, v) in job.headers { list = curl_slist_append(list, "\(k): \(v)") }
        list = curl_slist_append(list, "Expect:")
        t.headerList = list
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(list))
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, ctx)
        _ = ccurl_easy_setopt_write_cb(easy) { ptr, size, nmemb, userdata in
            let n = size * nmemb
            guard let userdata, let ptr else { return n }
            let t = Unmanaged<Transfer>.fromOpaque(userdata).takeUnretainedValue()
            let room = t.maxResponseBytes - t.response.count
            if room > 0 {
                ptr.withMemoryRebound(to: UInt8.self, capacity: n) { t.response.append(contentsOf: UnsafeBufferPointer(start: $0, count: min(room, n))) }
            }
            t.responseSeen += n
            // A response body is read only up to a cap: past it the transfer stops.
            return t.responseSeen > t.abortAfterBytes ? 0 : n
        }
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_OPENSOCKETDATA, ctx)
        _ = ccurl_easy_setopt_opensocket_cb(easy) { clientp, _, address in
            guard let clientp, let address else { return CURL_SOCKET_BAD }
            let t = Unmanaged<Transfer>.fromOpaque(clientp).takeUnretainedValue()
            let cls = CurlTransport.classify(address)
            if !EgressPolicy.allows(cls, allowPrivate: t.job.allowPrivateNetwork) {
                t.refused = cls
                return CURL_SOCKET_BAD
            }
            let a = address.pointee
            return (try? Socket.open(family: a.family, type: a.socktype, protocol: a.protocol)) ?? CURL_SOCKET_BAD
        }
        _ = ccurl_easy_setopt_ptr(easy, CURLOPT_PREREQDATA, ctx)
        let checked = ccurl_easy_setopt_prereq_cb(easy) { clientp, primaryIP, _, _, _ in
            guard let clientp else { return CURL_PREREQFUNC_ABORT }
            let t = Unmanaged<Transfer>.fromOpaque(clientp).takeUnretainedValue()
            // An address that does not parse is judged like a reserved one (refused unless allowed).
            let cls = primaryIP.flatMap { EgressPolicy.classify(literal: String(cString: $0)) } ?? .reserved
            if !EgressPolicy.allows(cls, allowPrivate: t.job.allowPrivateNetwork) {
                t.refused = cls
                return CURL_PREREQFUNC_ABORT
            }
            return CURL_PREREQFUNC_OK
        }
        if checked != CURLE_OK {
            // A libcurl without the pre-request callback (before 7.80): fail closed, each transfer
            // on a connection of its own, opened (and so checked) for it and closed after it.
            _ = ccurl_easy_setopt_long(easy, CURLOPT_FRESH_CONNECT, 1)
            _ = ccurl_easy_setopt_long(easy, CURLOPT_FORBID_REUSE, 1)
        }
        active[easy] = t
        curl_multi_add_handle(multi, easy)
    }

    /// The class of the address curl is about to connect to. `addr` is the start of a sockaddr
    /// storage that continues past the struct's 16 bytes (IPv6), so it is read in place.
    static func classify(_ p: UnsafeMutablePointer<curl_sockaddr>) -> AddressClass {
        let raw = UnsafeRawPointer(p) + MemoryLayout<curl_sockaddr>.offset(of: \curl_sockaddr.addr)!
        switch p.pointee.family {
        case AF_INET:
            let sin = raw.loadUnaligned(as: sockaddr_in.self)
            return EgressPolicy.classify(ipv4: UInt32(bigEndian: sin.sin_addr.s_addr))
        case AF_INET6:
            let sin6 = raw.loadUnaligned(as: sockaddr_in6.self)
            return EgressPolicy.classify(ipv6: withUnsafeBytes(of: sin6.sin6_addr) { Array($0) })
        default:
            return .reserved
        }
    }

    /// Runs what curl can do now; returns the transfers that finished.
    func perform() -> [(tag: Int, result: TransferResult)] {
        var running: Int32 = 0
        curl_multi_perform(multi, &running)
        var done: [(tag: Int, result: TransferResult)] = []
        var left: Int32 = 0
        while let msg = curl_multi_info_read(multi, &left) {
            guard msg.pointee.msg == CURLMSG_DONE, let easy = msg.pointee.easy_handle else { continue }
            let code = msg.pointee.data.result
            guard let t = active.removeValue(forKey: easy) else { continue }
            var status = 0
            _ = ccurl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
            var error = ""
            if let refused = t.refused {
                error = "refused: the target resolved to a \(refused.rawValue) address (this endpoint may not reach private addresses)"
                status = 0
            } else if code == CURLE_OK || (code == CURLE_WRITE_ERROR && status > 0) {
                // Done; a response cut off at the body cap still delivered its status.
            } else {
                error = String(cString: curl_easy_strerror(code))
                status = 0
            }
            let ms = Int64((Instant.now().nanoseconds &- t.started.nanoseconds) / 1_000_000)
            done.append((t.job.tag, TransferResult(status: status, error: error, durationMs: ms, responsePrefix: t.response)))
            curl_multi_remove_handle(multi, easy)
            curl_slist_free_all(t.headerList)
            Unmanaged.passUnretained(t).release()
            curl_easy_reset(easy)
            idle.append(easy)
        }
        return done
    }

    /// Waits for socket activity, a wakeup, or `timeoutMs`.
    func poll(timeoutMs: Int32) {
        curl_multi_poll(multi, nil, 0, timeoutMs, nil)
    }
}
