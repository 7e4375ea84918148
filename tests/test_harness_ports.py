"""The test servers' ports: picked where no `bind(0)` lands, never handed to two processes of
the harness at once, and picked again when another process took one before the server
bound it (CI, 2026-12-04: an SGLang server's uvicorn failed to bind after a 30 s model load
and the test failed with exit 3; later two test workers drew the same port and one's
requests reached the other's server)."""
import os
import socket
import subprocess
import sys

from harness.server import (
    PortTaken, _ephemeral_low, free_port, free_ports, launch_on_free_port, release_port)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A real HTTP server in a child process: 200 on /health, exits 1 when its port is taken.
HEALTH_SERVER = """
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class Health(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
"""


def test_free_port_is_below_the_ephemeral_range_and_bindable():
    low = _ephemeral_low()
    for _ in range(20):
        port = free_port()
        if low - 1 - 30000 >= 256:
            assert 30000 <= port < low
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_free_port_respects_its_upper_bound():
    assert all(30000 <= free_port(high=30300) <= 30300 for _ in range(20))


def _free_port_in_another_process(port: int) -> int:
    """What `free_port` hands a real second process that asks for `port` alone."""
    out = subprocess.run(
        [sys.executable, "-c", "import sys; from harness.server import free_port; "
         f"print(free_port(low={port}, high={port}))"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    return int(out.stdout)


def test_a_port_handed_out_is_not_handed_to_another_process_until_released():
    port = free_port(high=30300)
    try:
        assert _free_port_in_another_process(port) != port  # claimed: it gets another
    finally:
        release_port(port)
    assert _free_port_in_another_process(port) == port      # given back: free for anyone


def test_every_port_of_a_range_is_claimed_not_only_its_base():
    """A server's endpoints on base .. base + 2: none of them is handed to a server that
    another process (or this one) starts next (CI rehearsal: vLLM got base + 1)."""
    base = free_ports(3)
    try:
        for port in (base, base + 1, base + 2):
            with socket.socket() as s:
                s.bind(("127.0.0.1", port))
            assert _free_port_in_another_process(port) != port, port
    finally:
        for port in (base, base + 1, base + 2):
            release_port(port)
    assert _free_port_in_another_process(base + 2) == base + 2  # given back


def test_a_port_taken_before_the_server_binds_it_is_picked_again(tmp_path):
    taken: list[socket.socket] = []
    ports: list[int] = []

    def command(port: int) -> list[str]:
        ports.append(port)
        if not taken:  # another process takes the first port between pick and bind
            s = socket.socket()
            s.bind(("127.0.0.1", port))
            s.listen()
            taken.append(s)
        return [sys.executable, "-c", HEALTH_SERVER, str(port)]

    server = None
    try:
        server = launch_on_free_port(command, {}, str(tmp_path / "server.log"), timeout=60,
                                     label="health server")
        assert len(ports) == 2 and server.port == ports[1] != ports[0]
    finally:
        if server is not None:
            server.stop()
        for s in taken:
            s.close()


def test_a_port_taken_on_every_try_is_an_error_that_names_it(tmp_path):
    taken: list[socket.socket] = []

    def command(port: int) -> list[str]:
        s = socket.socket()
        s.bind(("127.0.0.1", port))
        s.listen()
        taken.append(s)
        return [sys.executable, "-c", HEALTH_SERVER, str(port)]

    try:
        launch_on_free_port(command, {}, str(tmp_path / "server.log"), timeout=60, tries=2,
                            label="health server")
        raise AssertionError("started on a taken port")
    except PortTaken as e:
        assert "health server exited with 1" in str(e)
        assert "Address already in use" in str(e)
        assert len(taken) == 2
    finally:
        for s in taken:
            s.close()
