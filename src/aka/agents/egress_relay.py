"""The agent's side of its network: started by the guard inside the agent's own network namespace,
it listens on the namespace's loopback and hands every connection to the platform's egress gate
(`aka.agents.egress`) through the gate's Unix socket, then becomes the agent CLI (exec).

Two kinds of listener: the proxy port (`HTTP(S)_PROXY` points there; bytes pass unchanged, the
gate reads the proxy request) and, for a model endpoint on the host's loopback
(`http://127.0.0.1:8000`), the same port inside, so a CLI that never uses a proxy for loopback
still reaches it (the relay asks the gate for that endpoint on the connection's behalf). This
process decides nothing: whatever it forwards, the gate checks. Standard library only, run with
`python -I -S` (it must start fast and import nothing the agent could have planted).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import threading

CHUNK = 65536
LOOPBACK = ("127.0.0.1", "::1")


def pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy `source` to `sink` until `source` ends, then end `sink`'s writing half."""
    try:
        while data := source.recv(CHUNK):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def join(a: socket.socket, b: socket.socket) -> None:
    """Both directions until both end, then close both."""
    other = threading.Thread(target=pump, args=(b, a), daemon=True)
    other.start()
    pump(a, b)
    other.join()
    a.close()
    b.close()


def to_gate(gate_path: str, client: socket.socket, endpoint: str | None) -> None:
    """One connection: through the gate, asking it for `endpoint` first when given."""
    gate = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        gate.connect(gate_path)
        if endpoint is not None:
            gate.sendall(f"CONNECT {endpoint} HTTP/1.1\r\nHost: {endpoint}\r\n\r\n".encode())
            head = b""
            while b"\r\n\r\n" not in head and len(head) < CHUNK:
                data = gate.recv(CHUNK)
                if not data:
                    break
                head += data
            answer, _, rest = head.partition(b"\r\n\r\n")
            if not answer.split(b" ")[1:2] == [b"200"]:
                client.sendall(head)  # the gate's refusal, as an HTTP answer the client can show
                raise OSError("refused")
            if rest:
                client.sendall(rest)
    except OSError:
        gate.close()
        client.close()
        return
    join(client, gate)


def listen(port: int) -> list[socket.socket]:
    """Listening sockets on the namespace's loopback, IPv4 and (where there is one) IPv6."""
    found = []
    for family, host in ((socket.AF_INET, LOOPBACK[0]), (socket.AF_INET6, LOOPBACK[1])):
        try:
            server = socket.socket(family, socket.SOCK_STREAM)
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind((host, port))
            server.listen(128)
            found.append(server)
        except OSError:
            if family == socket.AF_INET:
                raise
    return found


def serve(server: socket.socket, gate_path: str, endpoint: str | None) -> None:
    while True:
        client, _ = server.accept()
        threading.Thread(target=to_gate, args=(gate_path, client, endpoint), daemon=True).start()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="egress_relay")
    parser.add_argument("--gate", required=True, help="the gate's Unix socket")
    parser.add_argument("--proxy-port", type=int, required=True)
    parser.add_argument("--forward", action="append", default=[], help="HOST:PORT of a loopback endpoint")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command after --")
    listeners: list[tuple[socket.socket, str | None]] = []
    for server in listen(args.proxy_port):
        listeners.append((server, None))
    for endpoint in args.forward:
        port = int(endpoint.rsplit(":", 1)[1])
        listeners += [(server, endpoint) for server in listen(port)]
    if os.fork() == 0:  # the relay serves; the parent becomes the CLI, which the namespace ends with
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        threads = [threading.Thread(target=serve, args=(s, args.gate, e), daemon=True) for s, e in listeners]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        os._exit(0)
    for server, _ in listeners:
        server.close()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
