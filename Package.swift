// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Roomcast",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "roomcast", targets: ["Roomcast"]),
        .executable(name: "roomcast-echo", targets: ["RoomcastEcho"]),
        .executable(name: "roomcast-bench", targets: ["RoomcastBench"]),
        .executable(name: "roomcast-webhook-bench", targets: ["RoomcastWebhookBench"]),
        .executable(name: "chat-bench", targets: ["ChatBench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.0.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.0.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.0.0"),
    ],
    targets: [
        // C: what Glibc does not export (epoll, eventfd, timerfd, accept4).
        .target(name: "CShims"),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),

        // Sockets, the syscall wrapper, the epoll loop, timers and write queues.
        .target(name: "Reactor", dependencies: ["CShims"]),
        // Pure codecs: bytes in, values out; no I/O, clocks or randomness.
        .target(name: "HTTP1"),
        .target(name: "WebSocket", dependencies: ["CZlib", .product(name: "Crypto", package: "swift-crypto")]),
        // The chat domain: pure, deterministic, no I/O (SPEC §3, §6, §7).
        .target(name: "Chat"),
        // What the engine's log carries, pure: its records and their codec, the request ledger
        // (nonces and idempotency keys judged from the log), the webhook records and the ids made
        // while an entry is applied. Used by one node's log and the cluster's alike.
        .target(name: "Replication", dependencies: ["Chat"]),
        // SQLite through GRDB: schema, migrations, group-committing writer.
        .target(name: "Store", dependencies: [
            "Chat", "Reactor", .product(name: "GRDB", package: "GRDB.swift"), .product(name: "GRDBSQLite", package: "GRDB.swift"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        // Connection state machines, router, one loop per core.
        .target(name: "Server", dependencies: [
            "Reactor", "HTTP1", "WebSocket", .product(name: "Logging", package: "swift-log"),
        ]),

        .executableTarget(name: "Roomcast", dependencies: [
            "CShims", "Chat", "Server", "Gateway", "ClusterNode", "Engine", "Wire", "Store", "Webhooks", .product(name: "Logging", package: "swift-log"),
            .product(name: "Metrics", package: "swift-metrics"), .product(name: "Prometheus", package: "swift-prometheus"),
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        .executableTarget(name: "RoomcastEcho", dependencies: [
            "Server", "WebSocket", .product(name: "Logging", package: "swift-log"),
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),

        // Load generator: only our Reactor/HTTP1/WebSocket and the wire format, so it can measure
        // us and our peers.
        .executableTarget(name: "RoomcastBench", dependencies: [
            "Reactor", "HTTP1", "WebSocket", "Wire", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        // The webhook delivery benchmark: the outbox and libcurl thread, and a receiver.
        .executableTarget(name: "RoomcastWebhookBench", dependencies: [
            "Reactor", "Server", "Store", "Webhooks", "Chat", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
        ]),

        // Benchmark of the chat domain alone (commands per second on one thread).
        .executableTarget(name: "ChatBench", dependencies: ["Chat", "Replication"]),

        // Webhooks: the durable outbox, signing formats, egress policy, libcurl multi delivery (SPEC §9).
        .target(name: "Webhooks", dependencies: [
            "CCurl", "Chat", "Replication", "Store", "Reactor", "HTTP1", .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Logging", package: "swift-log"), .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "CoreMetrics", package: "swift-metrics"),
        ]),

        // The wire format, pure (no I/O, no threads): request DTOs, event and reply encoders, the op
        // table, the error and close-code table, request signing, the published documents.
        .target(name: "Wire", dependencies: ["Chat", "HTTP1", .product(name: "Crypto", package: "swift-crypto")]),
        // The engine thread that owns the domain, and the publisher of committed outcomes.
        .target(name: "Engine", dependencies: [
            "Chat", "Replication", "Store", "Reactor", "HTTP1", "WebSocket", "Webhooks", "Wire", .product(name: "Logging", package: "swift-log"),
        ]),
        // The browser side as resources: the JavaScript client library and the console (BX-3, BX-4).
        // Their unit tests (`node --test clients/js/test/`) are not shipped.
        .target(name: "WebAssets", path: "clients", exclude: ["js/test", "examples"], sources: ["WebAssets.swift"],
                resources: [.copy("js/roomcast.js"), .copy("js/roomcast.d.ts"), .copy("console")]),
        // Routes, sessions, hubs and wiring: joins the server, the engine and the wire format.
        .target(name: "Gateway", dependencies: [
            "Server", "Engine", "Wire", "Chat", "Replication", "Store", "Reactor", "HTTP1", "WebSocket", "Webhooks", "WebAssets", "Cluster", "ClusterNode",
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "Logging", package: "swift-log"), .product(name: "CoreMetrics", package: "swift-metrics"),
            .product(name: "Prometheus", package: "swift-prometheus"),
        ]),

        // The cluster on PostgreSQL (CL-1..CL-6, CLUSTER.md): the shared log, the schema, the node
        // registry, through libpq; snapshots compressed with zlib and stored in chunks.
        .target(name: "Cluster", dependencies: ["CLibPQ", "CZlib", "Reactor", .product(name: "Logging", package: "swift-log")]),
        // A cluster node: the shared log as the engine's log (`ClusterLink`) and the threads that
        // join them (`ClusterReplicator`: appender, reader, membership, snapshots).
        .target(name: "ClusterNode", dependencies: [
            "Cluster", "Engine", "Store", "Replication", "Chat", "Reactor", "Wire", .product(name: "Logging", package: "swift-log"),
        ]),

        // Test support (process launcher, raw TCP and WebSocket clients); used only by tests.
        .target(name: "TestKit", dependencies: ["WebSocket", "HTTP1", "Wire"]),

        .testTarget(name: "HTTP1Tests", dependencies: ["HTTP1", "TestKit"]),
        .testTarget(name: "ChatTests", dependencies: ["Chat", "Replication", "TestKit"]),
        .testTarget(name: "ReplicationTests", dependencies: ["Replication", "Chat", "TestKit"]),
        .testTarget(name: "WebhooksTests", dependencies: [
            "Webhooks", "Chat", "Store", "Reactor", "TestKit", .product(name: "GRDB", package: "GRDB.swift"), .product(name: "Logging", package: "swift-log"),
            .product(name: "Crypto", package: "swift-crypto"),
        ]),
        .testTarget(name: "StoreTests", dependencies: [
            "Store", "Chat", "TestKit", .product(name: "GRDB", package: "GRDB.swift"), .product(name: "Logging", package: "swift-log"),
            .product(name: "Crypto", package: "swift-crypto"),
        ]),
        .testTarget(name: "GatewayTests", dependencies: [
            "Gateway", "ClusterNode", "Engine", "Wire", "Chat", "Replication", "Store", "Server", "Reactor", "HTTP1", "WebSocket", "TestKit",
            .product(name: "Logging", package: "swift-log"), .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Crypto", package: "swift-crypto"),
        ]),
        .testTarget(name: "WebSocketTests", dependencies: ["WebSocket", "TestKit"]),
        .testTarget(name: "ClusterTests", dependencies: [
            "Cluster", "TestKit", "Engine", "Webhooks", "Store", "Chat", "Replication", .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .testTarget(name: "ReactorTests", dependencies: ["Reactor"]),
        .testTarget(name: "ServerTests", dependencies: [
            "Server", "Reactor", "HTTP1", "WebSocket", "TestKit", .product(name: "Logging", package: "swift-log"),
        ]),
    ]
)
