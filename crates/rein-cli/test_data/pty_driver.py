"""Drives a command in a pseudo-terminal for rein-cli's chat tests.

Usage: python3 pty_driver.py COMMAND [ARGS...] < steps.json
Steps: [{"expect": TEXT} | {"send": TEXT} | {"interrupt": true} | {"eof": true}], run in order.
Every `expect` waits (up to a generous limit, only so a broken build cannot hang the suite) until
TEXT appears in the output after the previous match. Prints a JSON object on stdout:
{"ok": bool, "failed_step": N|null, "exit": CODE|null, "output": TEXT}.
"""
import json, os, pty, select, signal, sys, time

LIMIT = 120.0

def main():
    steps = json.load(sys.stdin)
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm"
        os.execvp(sys.argv[1], sys.argv[1:])
    output = b""
    cursor = 0
    failed = None
    def read_some(timeout):
        nonlocal output
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(fd, 65536)
        except OSError:
            return False
        if not data:
            return False
        output += data
        return True
    for index, step in enumerate(steps):
        if "expect" in step:
            wanted = step["expect"].encode()
            deadline = time.monotonic() + LIMIT
            alive = True
            while output.find(wanted, cursor) < 0 and time.monotonic() < deadline and alive:
                alive = read_some(0.2)
            found = output.find(wanted, cursor)
            if found < 0:
                failed = index
                break
            cursor = found + len(wanted)
        elif "send" in step:
            os.write(fd, step["send"].encode())
        elif "interrupt" in step:
            os.write(fd, b"\x03")
        elif "eof" in step:
            os.write(fd, b"\x04")
    code = None
    if failed is None:
        deadline = time.monotonic() + LIMIT
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                code = os.waitstatus_to_exitcode(status)
                break
            if not read_some(0.2):
                done, status = os.waitpid(pid, 0)
                code = os.waitstatus_to_exitcode(status)
                break
        try:
            while read_some(0.1):
                if not select.select([fd], [], [], 0)[0]:
                    break
        except OSError:
            pass
    if code is None:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    print(json.dumps({"ok": failed is None and code == 0, "failed_step": failed, "exit": code,
                      "output": output.decode("utf-8", "replace")}))

main()
