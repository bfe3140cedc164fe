"""A real SMTP server process for the effect tests (aiosmtpd on 127.0.0.1).

    python tests/effects/smtp_sink.py --port P --dir D [--stall-seconds S]

Every accepted message is written to D as <queue-id>.eml (raw bytes, as received) before
the server replies. The recipient's local part steers the server, so one process serves
every scenario:

    stall@...       accept the whole message, write it, then wait S seconds before the 250
                    reply (the client times out: "accepted, outcome unknown")
    stall-once@...  like stall, but only the first time a Message-ID is seen
    reject@...      550 at RCPT (permanent)
    later@...       451 at RCPT (temporary)
    refuse-data@... 554 after the content (permanent)
"""

import argparse
import asyncio
import email
import os
import signal
import threading
import uuid
from pathlib import Path

from aiosmtpd.controller import Controller


class Sink:
    def __init__(self, directory: Path, stall_seconds: float):
        self.directory = directory
        self.stall_seconds = stall_seconds
        self.seen_message_ids: set[str] = set()

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        local = address.split("@", 1)[0].lower()
        if local == "reject":
            return "550 5.1.1 no such mailbox"
        if local == "later":
            return "451 4.3.0 try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        locals_ = {address.split("@", 1)[0].lower() for address in envelope.rcpt_tos}
        if "refuse-data" in locals_:
            return "554 5.6.0 content rejected"
        content = envelope.original_content or envelope.content
        message_id = email.message_from_bytes(content).get("Message-ID", "")
        queue_id = uuid.uuid4().hex[:12]
        temp = self.directory / f".{queue_id}.tmp"
        temp.write_bytes(content)
        os.replace(temp, self.directory / f"{queue_id}.eml")
        first_time = message_id not in self.seen_message_ids
        self.seen_message_ids.add(message_id)
        if "stall" in locals_ or ("stall-once" in locals_ and first_time):
            await asyncio.sleep(self.stall_seconds)
        return f"250 2.0.0 OK queued as {queue_id}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--stall-seconds", type=float, default=5.0)
    args = parser.parse_args()
    directory = Path(args.dir)
    directory.mkdir(parents=True, exist_ok=True)
    controller = Controller(Sink(directory, args.stall_seconds), hostname="127.0.0.1", port=args.port)
    controller.start()  # returns once the server answers
    print(f"smtp sink listening on 127.0.0.1:{args.port}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    controller.stop()


if __name__ == "__main__":
    main()
