import Chat
import Engine
import Foundation
import Reactor
import Server
import WebSocket
import Wire

/// TR-1, TR-2: a client session whose events travel over plain HTTP: a Server-Sent Events stream
/// (`EventStreamTransport`) or a long-poll session (`PollTransport`). It is the session's
/// transport (`SessionTransport`), so the session, the hub and their rules (bounds, drop marks and
/// gaps, rate limits, close codes) are the WebSocket's own; only the framing differs. The stream
/// itself sends the session its `connect` and one `room.join` per room it was opened with, and
/// passes on the commands of `POST /client/ops`: each message is the protocol's own
/// `{"id", "op", "args"}`, under an id of the stream's, so that every answer finds its way back
/// (the `connect` answer becomes the `hello` event, a join's a `join` event, an op's its HTTP
/// answer). Events get the stream's cursor: every room's epoch and offset (`StreamCursor`).
/// Confined to its hub's loop.
class ClientStream: SessionTransport {
    /// The id ops and polls name it by: the loop's index, a dash, random hex.
    let id: String
    let session: ClientSession
    let hub: Hub
    let app: String
    let userId: String
    /// Each room's position, in the order the stream named them (at most `Limits.maxStreamRooms`).
    private(set) var rooms: [StreamCursor.Room]
    /// Events handed to the client so far (a poll acknowledges by it).
    private(set) var sequence: UInt64 = 0
    /// Set once the stream closed (its `close` event is the last thing it sends).
    fileprivate(set) var ended = false

    private enum Pending {
        case connect
        case join(String)
        case op(clientId: Int?, writer: ResponseWriter)
    }
    private var pending: [Int: Pending] = [:]
    private var nextMessageId = 1

    init(id: String, session: ClientSession, hub: Hub, claims: TokenClaims, resuming: [StreamCursor.Room]) {
        self.id = id
        self.session = session
        self.hub = hub
        self.app = claims.app
        self.userId = claims.sub
        self.rooms = resuming
    }

    /// The cursor as of now.
    var cursor: String { StreamCursor(app: app, stream: hub.resumeWindow.stream, sequence: sequence, rooms: rooms).encoded }

    /// Opens the session: `connect` with the token, then a join per room (resuming those `cursor`
    /// holds), through the session as a WebSocket's would go.
    func start(token: String, rooms roomIds: [String], from cursor: StreamCursor?) {
        hub.clientStreams[id] = self
        session.opened(self)
        submit(.connect) { mid in
            JSONWriter.object { w in
                w.field("id", mid)
                w.field("op", "connect")
                w.key("args")
                w.beginObject()
                w.field("token", token)
                w.endObject()
            }
        }
        for roomId in roomIds {
            let from = cursor?.rooms.first { $0.roomId == roomId }
            submit(.join(roomId)) { mid in
                JSONWriter.object { w in
                    w.field("id", mid)
                    w.field("op", "room.join")
                    w.key("args")
                    w.beginObject()
                    w.field("roomId", roomId)
                    if let from, let cursor {
                        w.key("resume")
                        w.beginObject()
                        w.field("epoch", from.epoch)
                        w.field("stream", cursor.stream)
                        w.field("offset", from.offset)
                        w.endObject()
                    }
                    w.endObject()
                }
            }
        }
    }

    /// A command of `POST /client/ops` (`body` is `{"id", "op", "args"}`): the session's answer is
    /// the writer's response, under the client's own id.
    func submit(op body: [UInt8], writer: ResponseWriter) {
        guard let envelope = OpTable.envelope(body), let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any],
              let args = object["args"] as? [String: Any], let argsJSON = try? JSONSerialization.data(withJSONObject: args) else {
            writer.send(.json(.badRequest, Encode.errorFrame(id: nil, GatewayError(.badRequest, "the body is {\"id\": number, \"op\": string, \"args\": object}", field: "op"))))
            return
        }
        guard !ended else {
            writer.send(RESTAPI.error(GatewayError(.unknownStream, "the stream has ended", field: "stream")))
            return
        }
        submit(.op(clientId: envelope.id, writer: writer)) { mid in
            JSONWriter.object { w in
                w.field("id", mid)
                w.field("op", envelope.op)
                w.key("args")
                w.raw(Array(argsJSON))
            }
        }
    }

    /// Hands the session one message, written under the next id of the stream's.
    private func submit(_ what: Pending, _ message: (Int) -> [UInt8]) {
        let mid = nextMessageId
        nextMessageId += 1
        pending[mid] = what
        session.handle(message(mid))
    }

    // MARK: SessionTransport

    func sendFrame(_ frame: ByteBlock) { take(frame, source: frame) }

    func sendFrame(_ frame: ByteBlock, source: ByteBlock) { take(frame, source: source) }

    var queuedBytes: Int { 0 }
    var backlogBytes: Int { queuedBytes }

    func close(code: WebSocketCloseCode, reason: String) {
        guard !ended else { return }
        ended = true
        emit(name: "close", data: JSONWriter.object { w in
            w.field("code", Int(code.rawValue))
            w.field("reason", reason)
        })
        failPending("the stream closed (\(code.rawValue) \(reason))")
        finish()
        // As a WebSocket's end is told once its closing handshake is over: not from inside the
        // delivery or the command that closed it.
        let me = LoopBound(self, loop: hub.loop)
        hub.loop.execute { me.value.session.closed() }
    }

    func joinedRoom(_ roomId: String, epoch: String, offset: Int64) {
        let position = StreamCursor.Room(roomId: roomId, epoch: epoch, offset: offset)
        if let i = rooms.firstIndex(where: { $0.roomId == roomId }) {
            rooms[i] = position
        } else if rooms.count < Limits.maxStreamRooms {
            rooms.append(position)
        }
    }

    func leftRoom(_ roomId: String) { rooms.removeAll { $0.roomId == roomId } }

    // MARK: For the transports

    /// Writes (or keeps) one event with the cursor as of it.
    func emit(name: String, data: UnsafeRawBufferPointer) {}

    func emit(name: String, data: [UInt8]) {
        sequence += 1
        data.withUnsafeBytes { emit(name: name, data: $0) }
    }

    /// The stream closed: its `close` event is out; end the transport.
    func finish() {}

    /// Once a second (the hub's tick).
    func tick(now: Int64) {}

    /// At the heartbeat interval (TR-1).
    func heartbeat() {}

    /// Ops waiting for an answer that will not come are refused.
    fileprivate func failPending(_ why: String) {
        for (_, p) in pending {
            if case .op(_, let writer) = p { writer.send(RESTAPI.error(GatewayError(.unknownStream, why, field: "stream"))) }
        }
        pending = [:]
    }

    /// The transport is gone under the session (the client went away, or never came back).
    fileprivate func lost() {
        forget()
        guard !ended else { return }
        ended = true
        failPending("the stream ended")
        session.closed()
    }

    /// Forgets the stream (its session is closed or closing).
    func forget() {
        if hub.clientStreams[id] === self { hub.clientStreams[id] = nil }
    }

    // MARK: Frames to events

    /// Each frame of a block (one event, or a batch's) becomes one event: named and placed from
    /// its JSON `source`, its data from `frame` (the session's encoding, TR-5: the compact form is
    /// transcoded once per loop, not per stream).
    private func take(_ frame: ByteBlock, source: ByteBlock) {
        guard !ended else { return }
        var encoded: [Range<Int>] = []
        let same = frame.base == source.base
        if !same { Frames.forEach(in: frame) { _, _, payload in encoded.append(payload) } }
        var i = 0
        let src = source.bytes
        let enc = frame.bytes
        Frames.forEach(in: source) { opcode, _, payload in
            defer { i += 1 }
            guard opcode == WebSocketOpcode.text.rawValue else { return }
            let json = UnsafeRawBufferPointer(rebasing: src[payload])
            let data = same || i >= encoded.count ? json : UnsafeRawBufferPointer(rebasing: enc[encoded[i]])
            switch FrameKind.of(json) {
            case .answer(let mid, let bodyStart):
                answered(mid, body: UnsafeRawBufferPointer(rebasing: json[bodyStart...]), whole: json)
            case .event(let name, let roomId, let epoch, let offset):
                if let roomId, let epoch, let offset, let at = rooms.firstIndex(where: { $0.roomId == roomId }) {
                    // A resume's replay and a rewind's messages may come before the room's
                    // position: it only moves forward within an epoch.
                    if rooms[at].epoch != epoch || offset > rooms[at].offset { rooms[at] = StreamCursor.Room(roomId: roomId, epoch: epoch, offset: offset) }
                }
                sequence += 1
                emit(name: name, data: data)
            case .other:
                sequence += 1
                emit(name: "message", data: data)
            }
        }
    }

    /// An answer: `body` is what follows its `"id":N,` (`"ok":…}` or `"error":…}`).
    private func answered(_ mid: Int?, body: UnsafeRawBufferPointer, whole: UnsafeRawBufferPointer) {
        guard let mid, let what = pending.removeValue(forKey: mid) else {
            // Not one of the stream's (an answer with a null id: the session could not read a message).
            emit(name: "error", data: Array(whole))
            return
        }
        // A dictionary keeps its storage when emptied: an idle stream holds none.
        if pending.isEmpty { pending = [:] }
        let failed = body.starts(with: Array("\"error\"".utf8))
        switch what {
        case .connect:
            if failed {
                emit(name: "error", data: Array(whole))
                // A refused token closes the session itself, with its own code, right after this
                // answer; any other refusal ends the stream here.
                let me = LoopBound(self, loop: hub.loop)
                hub.loop.execute { if !me.value.ended { me.value.session.close(.notAuthenticated, "connect failed") } }
            } else {
                emit(name: "hello", data: Self.prefixed(JSONWriter.object { w in w.field("stream", id) }, body))
            }
        case .join(let roomId):
            if failed { leftRoom(roomId) }
            emit(name: "join", data: Self.prefixed(JSONWriter.object { w in w.field("roomId", roomId) }, body))
        case .op(let clientId, let writer):
            let head = JSONWriter.object { w in
                if let clientId { w.field("id", clientId) } else { w.key("id"); w.null() }
            }
            writer.send(.json(.ok, Self.prefixed(head, body)))
        }
    }

    /// `{"a":1}` and `"b":2}` as `{"a":1,"b":2}`.
    static func prefixed(_ object: [UInt8], _ rest: UnsafeRawBufferPointer) -> [UInt8] {
        var out = Array(object.dropLast())
        out.append(0x2C)
        out.append(contentsOf: rest)
        return out
    }

    /// A new stream id on `hub`'s loop.
    static func makeID(loop: Int) -> String { "\(loop)-" + randomHex(12) }

    /// The loop a stream id names.
    static func loop(of id: String) -> Int? {
        guard let dash = id.firstIndex(of: "-"), id.utf8.count <= 40 else { return nil }
        return Int(id[..<dash])
    }
}

/// TR-1: a session's events as Server-Sent Events on a streaming HTTP response (chunked). The
/// connection's output queue is the session's: past the drop marks the hub drops and tells gaps
/// as for a WebSocket, past the connection's bound the stream is closed as a slow consumer.
final class EventStreamTransport: ClientStream, ResponseStreamHandler {
    private var connection: Connection?
    private var wroteSinceHeartbeat = false
    private var token = ""
    private var roomIds: [String] = []
    private var resumeFrom: StreamCursor?

    /// The response's header fields.
    static let headers: [(String, String)] = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"), ("X-Accel-Buffering", "no")]

    func prepare(token: String, rooms: [String], from cursor: StreamCursor?) {
        self.token = token
        self.roomIds = rooms
        self.resumeFrom = cursor
    }

    override var queuedBytes: Int { connection?.queuedBytes ?? 0 }
    override var backlogBytes: Int { connection?.backlogBytes ?? 0 }

    override func emit(name: String, data: UnsafeRawBufferPointer) {
        write(EventStreamFormat.event(name: name, data: data, id: cursor))
    }

    private func write(_ bytes: [UInt8]) {
        guard let c = connection else { return }
        bytes.withUnsafeBytes { c.writeStream($0) }
        wroteSinceHeartbeat = true
        if c.isOverOutboundBound && !ended {
            c.dropUnsentStream()
            session.close(.slowConsumer, "slow consumer")
        }
    }

    override func finish() {
        connection?.finishStream()
        connection = nil
        forget()
    }

    override func heartbeat() {
        if !wroteSinceHeartbeat { write(EventStreamFormat.heartbeat) }
        wroteSinceHeartbeat = false
    }

    // MARK: ResponseStreamHandler

    func streamDidOpen(_ connection: Connection) {
        self.connection = connection
        start(token: token, rooms: roomIds, from: resumeFrom)
        // Only the start needed them.
        token = ""
        roomIds = []
        resumeFrom = nil
    }

    func streamShouldFinish(_ connection: Connection) { session.close(.goingAway, "server shutting down") }

    func streamDidClose(_ connection: Connection) {
        self.connection = nil
        lost()
    }
}

/// TR-2: a session for clients that cannot stream: its events wait here (bounded in bytes as a
/// connection's output is) until a poll takes them; a poll acknowledges what it was given by its
/// cursor, and waits for events up to its `wait`. A session no poll reaches within
/// `Limits.pollSessionTimeoutSeconds` is closed and forgotten.
final class PollTransport: ClientStream {
    private struct Item {
        let sequence: UInt64
        let json: [UInt8]
    }
    private var items: [Item] = []
    private var bytes = 0
    private let bound: Int
    private var waiting: (writer: ResponseWriter, timer: TimerID?)?
    private var answerScheduled = false
    private var lastPollAt: Int64

    init(id: String, session: ClientSession, hub: Hub, claims: TokenClaims, resuming: [StreamCursor.Room], bound: Int) {
        self.bound = bound
        lastPollAt = hub.clock()
        super.init(id: id, session: session, hub: hub, claims: claims, resuming: resuming)
    }

    override var queuedBytes: Int { bytes }

    override func emit(name: String, data: UnsafeRawBufferPointer) {
        let json = JSONWriter.object { w in
            w.field("event", name)
            w.key("data")
            w.raw(Array(data))
            w.field("cursor", cursor)
        }
        items.append(Item(sequence: sequence, json: json))
        bytes += json.count
        if bytes > bound && !ended {
            // As a slow connection's unsent output: dropped, then the close.
            items.removeAll()
            bytes = 0
            session.close(.slowConsumer, "slow consumer")
        }
        scheduleAnswer()
    }

    /// A poll: drops what `acknowledged` covers, then answers with the rest at once, or when
    /// events come, or after `wait` seconds with none. A newer poll answers a waiting one.
    func poll(acknowledged: UInt64?, wait: Int, writer: ResponseWriter) {
        lastPollAt = hub.clock()
        if let acknowledged {
            let keep = items.drop { $0.sequence <= acknowledged }
            bytes -= items.count == keep.count ? 0 : items[..<(items.count - keep.count)].reduce(0) { $0 + $1.json.count }
            items = Array(keep)
        }
        answerWaiting()
        if !items.isEmpty || wait == 0 || ended {
            answer(writer)
            return
        }
        let me = LoopBound(self, loop: hub.loop)
        waiting = (writer, hub.loop.schedule(after: .seconds(wait)) { me.value.answerWaiting() })
    }

    private func scheduleAnswer() {
        guard waiting != nil, !answerScheduled else { return }
        answerScheduled = true
        // After the rest of the batch: one answer for the events that came together.
        let me = LoopBound(self, loop: hub.loop)
        hub.loop.execute {
            me.value.answerScheduled = false
            me.value.answerWaiting()
        }
    }

    private func answerWaiting() {
        guard let (writer, timer) = waiting else { return }
        waiting = nil
        if let timer { hub.loop.cancel(timer) }
        answer(writer)
    }

    private func answer(_ writer: ResponseWriter) {
        lastPollAt = hub.clock()
        let last = cursor
        writer.send(.json(.ok, JSONWriter.object { w in
            w.field("stream", id)
            w.field("cursor", last)
            w.key("events")
            w.beginArray()
            for item in items { w.raw(item.json) }
            w.endArray()
        }))
        // The close event went out: nothing more will come.
        if ended { forget() }
    }

    override func finish() {
        if waiting != nil { scheduleAnswer() }
    }

    override func tick(now: Int64) {
        guard waiting == nil, now - lastPollAt > Int64(Limits.pollSessionTimeoutSeconds) * 1000 else { return }
        lost()
    }
}
