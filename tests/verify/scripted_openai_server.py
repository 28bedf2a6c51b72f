#!/usr/bin/env python3
"""A scripted OpenAI-shaped chat-completions server for xdp-gen's --generator-url test.

usage: scripted_openai_server.py SCRIPT.json LOG.jsonl PORT_FILE

SCRIPT.json is a list of answers, one per request in order: a string (the
assistant's content, answered with 200 and usage) or {"status": N, "body": ...}
(answered as given). Every request is appended to LOG.jsonl as
{"path", "authorization", "body"}. Listens on 127.0.0.1, an ephemeral port
written to PORT_FILE once it listens; serves until killed.
"""
import http.server
import json
import os
import sys

script_path, log_path, port_file = sys.argv[1:4]
answers = json.load(open(script_path))
served = 0


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):  # quiet: the test reads LOG.jsonl
        pass

    def do_POST(self):
        global served
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(log_path, "a") as log:
            log.write(json.dumps({"path": self.path, "authorization": self.headers.get("Authorization"),
                                  "body": json.loads(body)}) + "\n")
        answer = answers[min(served, len(answers) - 1)]
        served += 1
        if isinstance(answer, str):
            status, payload = 200, {
                "id": "chatcmpl-%d" % served, "object": "chat.completion", "model": "scripted",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": answer}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": len(answer.split()), "total_tokens": 1},
            }
        else:
            status, payload = answer["status"], answer["body"]
        data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
