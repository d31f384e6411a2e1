-- wrk: POST a webhook-sized JSON body (the peer run of scripts/bench-webhooks.sh).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"data":{"appKey":"bench","cause":0,"details":{"content":"hello, this is message 12345","messageId":"m12345","type":"text"},"roomId":"room45","time":1795260000000,"userIds":["user12345"]},"timestamp":"2026-11-21T12:00:00.000Z","type":"message.sent"}'
