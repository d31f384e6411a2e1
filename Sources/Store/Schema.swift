import GRDB

/// The database schema. Migrations are plain SQL and frozen once shipped: a change is a new
/// migration, never an edit of an old one.
enum Schema {
    static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1-chat") { db in
            try db.execute(sql: """
                CREATE TABLE app (
                    key TEXT PRIMARY KEY NOT NULL,
                    secret TEXT NOT NULL,
                    settings TEXT NOT NULL,
                    createdAt INTEGER NOT NULL,
                    origin TEXT NOT NULL CHECK (origin IN ('config', 'dev', 'api')),
                    allowedOrigins TEXT NOT NULL DEFAULT ''
                );
                CREATE TABLE room (
                    app TEXT NOT NULL REFERENCES app(key) ON DELETE CASCADE,
                    roomId TEXT NOT NULL,
                    name TEXT NOT NULL,
                    announcement TEXT NOT NULL,
                    ext TEXT NOT NULL,
                    broadcastUrl TEXT NOT NULL,
                    creator TEXT NOT NULL,
                    queueLevel INTEGER NOT NULL CHECK (queueLevel IN (0, 1)),
                    destroyPolicy TEXT NOT NULL CHECK (destroyPolicy IN ('inactive', 'fixed', 'whenEmpty')),
                    destroyValue INTEGER NOT NULL,
                    keepAlive INTEGER NOT NULL,
                    multiDevice TEXT NOT NULL CHECK (multiDevice IN ('single', 'multiple')),
                    muted INTEGER NOT NULL,
                    open INTEGER NOT NULL,
                    enterExitNotifications INTEGER NOT NULL,
                    queueLimit INTEGER NOT NULL,
                    createdAt INTEGER NOT NULL,
                    epoch TEXT NOT NULL,
                    lastActivity INTEGER NOT NULL,
                    PRIMARY KEY (app, roomId)
                ) WITHOUT ROWID;
                CREATE TABLE member (
                    app TEXT NOT NULL,
                    roomId TEXT NOT NULL,
                    userId TEXT NOT NULL,
                    role TEXT NOT NULL CHECK (role IN ('none', 'creator', 'manager', 'common')),
                    nickname TEXT NOT NULL,
                    avatar TEXT NOT NULL,
                    ext TEXT NOT NULL,
                    PRIMARY KEY (app, roomId, userId),
                    FOREIGN KEY (app, roomId) REFERENCES room(app, roomId) ON DELETE CASCADE
                ) WITHOUT ROWID;
                CREATE TABLE block (
                    app TEXT NOT NULL,
                    roomId TEXT NOT NULL,
                    userId TEXT NOT NULL,
                    until INTEGER NOT NULL,
                    PRIMARY KEY (app, roomId, userId),
                    FOREIGN KEY (app, roomId) REFERENCES room(app, roomId) ON DELETE CASCADE
                ) WITHOUT ROWID;
                CREATE TABLE permanentMute (
                    app TEXT NOT NULL,
                    roomId TEXT NOT NULL,
                    userId TEXT NOT NULL,
                    PRIMARY KEY (app, roomId, userId),
                    FOREIGN KEY (app, roomId) REFERENCES room(app, roomId) ON DELETE CASCADE
                ) WITHOUT ROWID;
                CREATE TABLE tempMute (
                    app TEXT NOT NULL,
                    roomId TEXT NOT NULL,
                    userId TEXT NOT NULL,
                    until INTEGER NOT NULL,
                    PRIMARY KEY (app, roomId, userId),
                    FOREIGN KEY (app, roomId) REFERENCES room(app, roomId) ON DELETE CASCADE
                ) WITHOUT ROWID;
                CREATE TABLE allowlist (
                    app TEXT NOT NULL,
                    roomId TEXT NOT NULL,
                    userId TEXT NOT NULL,
                    PRIMARY KEY (app, roomId, userId),
                    FOREIGN KEY (app, roomId) REFERENCES room(app, roomId) ON DELETE CASCADE
                ) WITHOUT ROWID;
                CREATE TABLE globalMute (
                    app TEXT NOT NULL REFERENCES app(key) ON DELETE CASCADE,
                    userId TEXT NOT NULL,
                    until INTEGER NOT NULL,
                    PRIMARY KEY (app, userId)
                ) WITHOUT ROWID;
                CREATE TABLE attribute (
                    app TEXT NOT NULL,
                    roomId TEXT NOT NULL,
                    key TEXT NOT NULL,
                    value TEXT NOT NULL,
                    owner TEXT NOT NULL,
                    autoDelete INTEGER NOT NULL,
                    updatedAt INTEGER NOT NULL,
                    PRIMARY KEY (app, roomId, key),
                    FOREIGN KEY (app, roomId) REFERENCES room(app, roomId) ON DELETE CASCADE
                ) WITHOUT ROWID;
                CREATE TABLE queueElement (
                    app TEXT NOT NULL,
                    roomId TEXT NOT NULL,
                    key TEXT NOT NULL,
                    value TEXT NOT NULL,
                    owner TEXT NOT NULL,
                    sequence INTEGER NOT NULL,
                    PRIMARY KEY (app, roomId, key),
                    FOREIGN KEY (app, roomId) REFERENCES room(app, roomId) ON DELETE CASCADE
                ) WITHOUT ROWID;
                CREATE TABLE message (
                    app TEXT NOT NULL,
                    roomId TEXT NOT NULL,
                    id TEXT NOT NULL,
                    sender TEXT NOT NULL,
                    senderNickname TEXT NOT NULL,
                    senderAvatar TEXT NOT NULL,
                    senderExt TEXT NOT NULL,
                    kind TEXT NOT NULL CHECK (kind IN ('text', 'custom', 'notification')),
                    content TEXT NOT NULL,
                    time INTEGER NOT NULL,
                    fromServer INTEGER NOT NULL,
                    PRIMARY KEY (app, roomId, id),
                    FOREIGN KEY (app, roomId) REFERENCES room(app, roomId) ON DELETE CASCADE
                ) WITHOUT ROWID;
                CREATE INDEX messageByTime ON message(app, roomId, time);
                CREATE INDEX messageAge ON message(app, time);
                """)
        }
        m.registerMigration("v2-ultra-groups-and-conversations") { db in
            try db.execute(sql: """
                CREATE TABLE ultraGroup (
                    app TEXT NOT NULL REFERENCES app(key) ON DELETE CASCADE,
                    groupId TEXT NOT NULL,
                    name TEXT NOT NULL,
                    creator TEXT NOT NULL,
                    createdAt INTEGER NOT NULL,
                    notificationLevel INTEGER NOT NULL CHECK (notificationLevel IN (-1, 0, 1, 2, 4, 5)),
                    PRIMARY KEY (app, groupId)
                ) WITHOUT ROWID;
                CREATE TABLE ultraGroupMember (
                    app TEXT NOT NULL,
                    groupId TEXT NOT NULL,
                    userId TEXT NOT NULL,
                    sequence INTEGER NOT NULL,
                    PRIMARY KEY (app, groupId, userId),
                    FOREIGN KEY (app, groupId) REFERENCES ultraGroup(app, groupId) ON DELETE CASCADE
                ) WITHOUT ROWID;
                CREATE TABLE ultraChannel (
                    app TEXT NOT NULL,
                    groupId TEXT NOT NULL,
                    channelId TEXT NOT NULL,
                    type TEXT NOT NULL CHECK (type IN ('public', 'private')),
                    createdAt INTEGER NOT NULL,
                    notificationLevel INTEGER NOT NULL CHECK (notificationLevel IN (-1, 0, 1, 2, 4, 5)),
                    sequence INTEGER NOT NULL,
                    PRIMARY KEY (app, groupId, channelId),
                    FOREIGN KEY (app, groupId) REFERENCES ultraGroup(app, groupId) ON DELETE CASCADE
                ) WITHOUT ROWID;
                CREATE TABLE ultraPrivateMember (
                    app TEXT NOT NULL,
                    groupId TEXT NOT NULL,
                    channelId TEXT NOT NULL,
                    userId TEXT NOT NULL,
                    sequence INTEGER NOT NULL,
                    PRIMARY KEY (app, groupId, channelId, userId),
                    FOREIGN KEY (app, groupId, channelId) REFERENCES ultraChannel(app, groupId, channelId) ON DELETE CASCADE
                ) WITHOUT ROWID;
                CREATE TABLE conversationStatus (
                    app TEXT NOT NULL REFERENCES app(key) ON DELETE CASCADE,
                    userId TEXT NOT NULL,
                    conversationType INTEGER NOT NULL CHECK (conversationType IN (1, 3, 6, 10)),
                    targetId TEXT NOT NULL,
                    channelId TEXT NOT NULL,
                    pinned INTEGER NOT NULL CHECK (pinned IN (0, 1)),
                    notificationLevel INTEGER NOT NULL CHECK (notificationLevel IN (-1, 0, 1, 2, 4, 5)),
                    version INTEGER NOT NULL,
                    updatedAt INTEGER NOT NULL,
                    PRIMARY KEY (app, userId, conversationType, targetId, channelId)
                ) WITHOUT ROWID;
                CREATE TABLE conversationTypeLevel (
                    app TEXT NOT NULL REFERENCES app(key) ON DELETE CASCADE,
                    userId TEXT NOT NULL,
                    conversationType INTEGER NOT NULL CHECK (conversationType IN (1, 3, 6, 10)),
                    notificationLevel INTEGER NOT NULL CHECK (notificationLevel IN (-1, 1, 2, 4, 5)),
                    PRIMARY KEY (app, userId, conversationType)
                ) WITHOUT ROWID;
                """)
        }
        m.registerMigration("v3-webhooks") { db in
            try db.execute(sql: """
                CREATE TABLE webhookEndpoint (
                    id TEXT PRIMARY KEY NOT NULL,
                    app TEXT NOT NULL REFERENCES app(key) ON DELETE CASCADE,
                    url TEXT NOT NULL,
                    secret TEXT NOT NULL,
                    previousSecret TEXT,
                    previousSecretExpiresAt INTEGER,
                    events TEXT NOT NULL,
                    format TEXT NOT NULL CHECK (format IN ('standard', 'rongcloud', 'nim')),
                    allowPrivateNetwork INTEGER NOT NULL CHECK (allowPrivateNetwork IN (0, 1)),
                    enabled INTEGER NOT NULL CHECK (enabled IN (0, 1)),
                    disabledReason TEXT NOT NULL,
                    origin TEXT NOT NULL CHECK (origin IN ('api', 'config')),
                    createdAt INTEGER NOT NULL
                );
                CREATE TABLE webhookMessage (
                    id TEXT PRIMARY KEY NOT NULL,
                    app TEXT NOT NULL,
                    type TEXT NOT NULL,
                    time INTEGER NOT NULL,
                    roomId TEXT NOT NULL,
                    userIds TEXT NOT NULL,
                    cause INTEGER NOT NULL,
                    details TEXT NOT NULL,
                    sequence INTEGER NOT NULL
                );
                CREATE INDEX webhookMessageByTime ON webhookMessage(app, time);
                CREATE TABLE webhookDelivery (
                    endpointId TEXT NOT NULL REFERENCES webhookEndpoint(id) ON DELETE CASCADE,
                    messageId TEXT NOT NULL REFERENCES webhookMessage(id) ON DELETE CASCADE,
                    sequence INTEGER NOT NULL,
                    status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'dead')),
                    attempts INTEGER NOT NULL,
                    nextAttemptAt INTEGER NOT NULL,
                    lastStatus INTEGER NOT NULL,
                    lastError TEXT NOT NULL,
                    updatedAt INTEGER NOT NULL,
                    PRIMARY KEY (endpointId, messageId)
                ) WITHOUT ROWID;
                CREATE INDEX webhookDeliveryByStatus ON webhookDelivery(status, sequence);
                CREATE INDEX webhookDeliveryByEndpoint ON webhookDelivery(endpointId, sequence);
                CREATE INDEX webhookDeliveryByMessage ON webhookDelivery(messageId);
                CREATE TABLE webhookAttempt (
                    endpointId TEXT NOT NULL,
                    messageId TEXT NOT NULL,
                    attempt INTEGER NOT NULL,
                    time INTEGER NOT NULL,
                    status INTEGER NOT NULL,
                    error TEXT NOT NULL,
                    durationMs INTEGER NOT NULL,
                    FOREIGN KEY (endpointId, messageId) REFERENCES webhookDelivery(endpointId, messageId) ON DELETE CASCADE
                );
                CREATE INDEX webhookAttemptByDelivery ON webhookAttempt(endpointId, messageId);
                """)
        }
        m.registerMigration("v4-room-streams-and-nonces") { db in
            try db.execute(sql: """
                CREATE TABLE meta (
                    key TEXT PRIMARY KEY NOT NULL,
                    value TEXT NOT NULL
                ) WITHOUT ROWID;
                CREATE TABLE roomEvent (
                    app TEXT NOT NULL,
                    roomId TEXT NOT NULL,
                    epoch TEXT NOT NULL,
                    "offset" INTEGER NOT NULL,
                    at INTEGER NOT NULL,
                    exceptUsers TEXT NOT NULL,
                    payload BLOB NOT NULL,
                    PRIMARY KEY (app, roomId, epoch, "offset")
                ) WITHOUT ROWID;
                CREATE INDEX roomEventByTime ON roomEvent(at);
                CREATE TABLE requestNonce (
                    app TEXT NOT NULL,
                    nonce TEXT NOT NULL,
                    at INTEGER NOT NULL,
                    PRIMARY KEY (app, nonce)
                ) WITHOUT ROWID;
                CREATE INDEX requestNonceByTime ON requestNonce(at);
                """)
        }
        m.registerMigration("v5-online-users") { db in
            try db.execute(sql: """
                CREATE TABLE onlineUser (
                    app TEXT NOT NULL,
                    userId TEXT NOT NULL,
                    device TEXT NOT NULL,
                    PRIMARY KEY (app, userId)
                ) WITHOUT ROWID;
                """)
        }
        m.registerMigration("v6-idempotency-keys") { db in
            try db.execute(sql: """
                CREATE TABLE idempotencyKey (
                    app TEXT NOT NULL,
                    key TEXT NOT NULL,
                    fingerprint TEXT NOT NULL,
                    status INTEGER NOT NULL,
                    contentType TEXT NOT NULL,
                    body BLOB NOT NULL,
                    at INTEGER NOT NULL,
                    PRIMARY KEY (app, key)
                ) WITHOUT ROWID;
                CREATE INDEX idempotencyKeyByTime ON idempotencyKey(at);
                CREATE INDEX idempotencyKeyByAppTime ON idempotencyKey(app, at);
                """)
        }
        m.registerMigration("v7-webhook-delivery-owner") { db in
            // Cluster mode (CL-6): the node run that sends a pending delivery (its incarnation);
            // 0 on a single node, which sends them all.
            try db.execute(sql: "ALTER TABLE webhookDelivery ADD COLUMN owner INTEGER NOT NULL DEFAULT 0")
        }
        m.registerMigration("v8-room-qos") { db in
            // QS-4: a room's protected senders (newline-joined); QS-6: its distribution stopped.
            try db.execute(sql: "ALTER TABLE room ADD COLUMN protectedSenders TEXT NOT NULL DEFAULT ''")
            try db.execute(sql: "ALTER TABLE room ADD COLUMN distributionStopped INTEGER NOT NULL DEFAULT 0")
            // QS-1: the class a message was sent with, and its type name.
            try db.execute(sql: "ALTER TABLE message ADD COLUMN priority TEXT NOT NULL DEFAULT 'normal'")
            try db.execute(sql: "ALTER TABLE message ADD COLUMN type TEXT NOT NULL DEFAULT ''")
        }
        m.registerMigration("v9-audiences") { db in
            // AU-1, AU-2: whom a message was addressed to (users, a tag expression and the tags it
            // names), a room's muted tags, and whom a kept room event reaches.
            try db.execute(sql: "ALTER TABLE message ADD COLUMN targets TEXT NOT NULL DEFAULT ''")
            try db.execute(sql: "ALTER TABLE message ADD COLUMN targetTags TEXT NOT NULL DEFAULT ''")
            try db.execute(sql: "ALTER TABLE message ADD COLUMN tagNames TEXT NOT NULL DEFAULT ''")
            try db.execute(sql: "ALTER TABLE room ADD COLUMN tagMutes TEXT NOT NULL DEFAULT ''")
            try db.execute(sql: "ALTER TABLE roomEvent ADD COLUMN addressed TEXT NOT NULL DEFAULT ''")
        }
        m.registerMigration("v10-operator-apps") { db in
            // OP-2: apps managed by the operator (`roomcast apps`, /v1/admin/apps). A rotated
            // secret stays valid until `previousSecretExpiresAt`; a disabled app is refused; an
            // app removed while its node runs is deleted when the node next starts.
            try db.execute(sql: """
                ALTER TABLE app ADD COLUMN previousSecret TEXT;
                ALTER TABLE app ADD COLUMN previousSecretExpiresAt INTEGER;
                ALTER TABLE app ADD COLUMN status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled', 'removing'));
                """)
        }
        m.registerMigration("v11-moderation") { db in
            // MO-1: a recalled message keeps its row (its place in history) without its content.
            try db.execute(sql: "ALTER TABLE message ADD COLUMN recalled INTEGER NOT NULL DEFAULT 0")
        }
        m.registerMigration("v12-audit-trail") { db in
            // MO-8: each app's newest moderation actions (`Limits.auditEntriesPerApp`), the
            // entry as JSON; `id` increases per app.
            try db.execute(sql: """
                CREATE TABLE auditEntry (
                    app TEXT NOT NULL REFERENCES app(key) ON DELETE CASCADE,
                    id INTEGER NOT NULL,
                    entry TEXT NOT NULL,
                    PRIMARY KEY (app, id)
                ) WITHOUT ROWID;
                """)
        }
        m.registerMigration("v13-community-messages") { db in
            // MO-3: each channel's stored messages (the message, with its latest edit and its
            // metadata, as JSON); the rowid keeps the order they were sent in across edits.
            // MO-5: the controls of a channel, or of the whole group (channelId '').
            try db.execute(sql: """
                CREATE TABLE communityMessage (
                    app TEXT NOT NULL,
                    groupId TEXT NOT NULL,
                    channelId TEXT NOT NULL,
                    messageId TEXT NOT NULL,
                    entry TEXT NOT NULL,
                    UNIQUE (app, groupId, channelId, messageId),
                    FOREIGN KEY (app, groupId, channelId) REFERENCES ultraChannel(app, groupId, channelId) ON DELETE CASCADE
                );
                CREATE TABLE communityRules (
                    app TEXT NOT NULL,
                    groupId TEXT NOT NULL,
                    channelId TEXT NOT NULL,
                    entry TEXT NOT NULL,
                    PRIMARY KEY (app, groupId, channelId),
                    FOREIGN KEY (app, groupId) REFERENCES ultraGroup(app, groupId) ON DELETE CASCADE
                ) WITHOUT ROWID;
                """)
        }
        m.registerMigration("v14-user-groups") { db in
            // MO-4: an ultra group's user groups, their members and the channels they are bound
            // to; `sequence` orders each as the ultra group's other lists. Deleting a group, a
            // channel or a user group takes what hangs on it along.
            try db.execute(sql: """
                CREATE TABLE ultraUserGroup (
                    app TEXT NOT NULL,
                    groupId TEXT NOT NULL,
                    userGroupId TEXT NOT NULL,
                    sequence INTEGER NOT NULL,
                    PRIMARY KEY (app, groupId, userGroupId),
                    FOREIGN KEY (app, groupId) REFERENCES ultraGroup(app, groupId) ON DELETE CASCADE
                ) WITHOUT ROWID;
                CREATE TABLE ultraUserGroupMember (
                    app TEXT NOT NULL,
                    groupId TEXT NOT NULL,
                    userGroupId TEXT NOT NULL,
                    userId TEXT NOT NULL,
                    sequence INTEGER NOT NULL,
                    PRIMARY KEY (app, groupId, userGroupId, userId),
                    FOREIGN KEY (app, groupId, userGroupId) REFERENCES ultraUserGroup(app, groupId, userGroupId) ON DELETE CASCADE
                ) WITHOUT ROWID;
                CREATE TABLE ultraChannelUserGroup (
                    app TEXT NOT NULL,
                    groupId TEXT NOT NULL,
                    channelId TEXT NOT NULL,
                    userGroupId TEXT NOT NULL,
                    sequence INTEGER NOT NULL,
                    PRIMARY KEY (app, groupId, channelId, userGroupId),
                    FOREIGN KEY (app, groupId, channelId) REFERENCES ultraChannel(app, groupId, channelId) ON DELETE CASCADE,
                    FOREIGN KEY (app, groupId, userGroupId) REFERENCES ultraUserGroup(app, groupId, userGroupId) ON DELETE CASCADE
                ) WITHOUT ROWID;
                """)
        }
        return m
    }
}
