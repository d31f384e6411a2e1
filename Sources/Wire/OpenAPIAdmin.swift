/// The operator API (OP-1, OP-2) in the OpenAPI document: `/v1/admin/…`, guarded by the operator
/// token (`--operator-token`), not by an app's signature.
extension OpenAPIDocument {
    static var operatorSecurityScheme: [String: Any] {
        ["OperatorToken": [
            "type": "http", "scheme": "bearer",
            "description": "The node's --operator-token (ROOMCAST_OPERATOR_TOKEN), no app's secret. Without one configured every operator call is refused (403, 40310); a missing or wrong token gets 401 (40110).",
        ]]
    }

    static func adminOp(_ summary: String, spec: String, params: [[String: Any]] = [], body: [String: Any]? = nil, ok: (Int, String),
                        id operationId: String) -> [String: Any] {
        var o: [String: Any] = [
            "summary": summary,
            "description": "SPEC: \(spec). Operator API.",
            "tags": ["Operator"],
            "operationId": operationId,
            "security": [["OperatorToken": []]],
            "responses": responses(ok).merging(["501": ["description": "Not on a cluster node (50101)",
                                                        "content": ["application/json": ["schema": ref("Error")]]],
                                                "500": ["description": "The backup could not be written (50010)",
                                                        "content": ["application/json": ["schema": ref("Error")]]]]) { a, _ in a },
        ]
        if !params.isEmpty { o["parameters"] = params }
        if let body { o["requestBody"] = ["required": false, "content": ["application/json": ["schema": body]]] }
        return o
    }

    static var appKeyParam: [String: Any] {
        param("key", "path", ["type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[A-Za-z0-9._-]+$"], description: "App key")
    }

    static var adminPaths: [String: Any] {
        let secretBody = obj(["secret": ["type": "string", "minLength": 16, "maxLength": 128, "pattern": "^[!-~]+$",
                                         "description": "The new secret; default: 48 random hex digits"]])
        return [
            "/v1/admin/apps": [
                "get": adminOp("List the apps (no secrets)", spec: "OP-2", ok: (200, "OperatorAppList"), id: "listApps"),
                "post": adminOp("Add an app; the answer carries its secret", spec: "OP-2",
                                body: obj(["key": ["type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[A-Za-z0-9._-]+$"],
                                           "secret": ["type": "string", "minLength": 16, "maxLength": 128, "pattern": "^[!-~]+$"]],
                                          required: ["key"]),
                                ok: (201, "OperatorAppWithSecret"), id: "addApp"),
            ],
            "/v1/admin/apps/{key}": [
                "get": adminOp("One app (no secret)", spec: "OP-2", params: [appKeyParam], ok: (200, "OperatorAppAnswer"), id: "getApp"),
                "delete": adminOp("Remove an app: refused at once, deleted with all its data when the node next starts", spec: "OP-2",
                                  params: [appKeyParam], ok: (200, "OperatorAppRemoved"), id: "removeApp"),
            ],
            "/v1/admin/apps/{key}/rotate-secret": [
                "post": adminOp("Give the app a new secret; the previous one is accepted for 24 h more", spec: "OP-2", params: [appKeyParam],
                                body: secretBody, ok: (200, "OperatorAppWithSecret"), id: "rotateAppSecret"),
            ],
            "/v1/admin/apps/{key}/disable": [
                "post": adminOp("Refuse the app's calls (40311) and close its WebSockets (4004); its data is kept", spec: "OP-2",
                                params: [appKeyParam], ok: (200, "OperatorAppAnswer"), id: "disableApp"),
            ],
            "/v1/admin/apps/{key}/enable": [
                "post": adminOp("Serve a disabled app again", spec: "OP-2", params: [appKeyParam], ok: (200, "OperatorAppAnswer"), id: "enableApp"),
            ],
            "/v1/admin/backup": [
                "post": adminOp("Back this node up into its backup directory (a name the node chooses); one at a time (40912)", spec: "OP-1",
                                ok: (201, "OperatorBackupAnswer"), id: "backupNode"),
            ],
        ]
    }

    static var adminSchemas: [String: Any] {
        let app: [String: Any] = obj([
            "key": str(), "status": ["type": "string", "enum": ["active", "disabled", "removing"]],
            "origin": ["type": "string", "enum": ["config", "dev", "api"], "description": "--app, the first start's development app, or the operator"],
            "createdAt": int("ms"), "rotating": bool("A previous secret is still accepted"),
            "previousSecretExpiresAt": int("ms: until when the previous secret is accepted"),
        ], required: ["key", "status", "origin", "createdAt", "rotating"])
        var withSecret = app
        if var props = withSecret["properties"] as? [String: [String: Any]] { props["secret"] = str(); withSecret["properties"] = props }
        withSecret["required"] = ["key", "status", "origin", "createdAt", "rotating", "secret"]
        return [
            "OperatorApp": app,
            "OperatorAppAnswer": obj(["app": ref("OperatorApp")], required: ["app"]),
            "OperatorAppWithSecret": obj(["app": withSecret], required: ["app"]),
            "OperatorAppList": obj(["apps": arr(ref("OperatorApp")), "generation": int("Raised by every change to the apps")],
                                   required: ["apps", "generation"]),
            "OperatorAppRemoved": obj(["removed": str(), "data": str()], required: ["removed"]),
            "OperatorBackupAnswer": obj(["backup": obj(["file": str("Absolute path on the node"), "name": str(), "bytes": int(), "pages": int(),
                                                        "schemaVersion": int(), "milliseconds": int()],
                                                       required: ["file", "name", "bytes", "schemaVersion"])], required: ["backup"]),
        ]
    }
}
