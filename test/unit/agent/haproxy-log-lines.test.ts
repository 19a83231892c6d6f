import { describe, expect, it } from "vitest";
import { haproxyLineLevel, haproxyLogText } from "../../../shared/agent/haproxy-log-lines.js";

// Lines as HAProxy 2.6.12 prints them (captured from `haproxy -W` with a runtime maint/ready, a reload and a SIGINT).
describe("HAProxy's stderr lines in the agent's log", () => {
  it.each([
    [
      "[WARNING]  (18031) : Server b/s2 is going DOWN for maintenance. 0 active and 0 backup servers left. 0 sessions active, 0 requeued, 0 remaining in queue.",
      "info",
    ],
    ["[WARNING]  (18031) : Server b/s2 is UP/READY (leaving forced maintenance).", "info"],
    [
      "[WARNING]  (1934) : Server default_web_80/s3 enters drain state. 1 active and 0 backup servers online. 0 sessions requeued, 0 total in queue.",
      "info",
    ],
    [
      "[WARNING]  (18031) : Server b/s1 is UP, reason: Layer4 check passed, check duration: 0ms. 1 active and 0 backup servers online.",
      "info",
    ],
    ["[WARNING]  (18028) : Former worker (18031) exited with code 0 (Exit)", "info"],
    ["[WARNING]  (18028) : Reexecuting Master process", "info"],
    ["[WARNING]  (18028) : Exiting Master process...", "info"],
    ["[ALERT]    (18028) : Current worker (18074) exited with code 130 (Interrupt)", "info"],
    ["[ALERT]    (18028) : Current worker (18074) exited with code 143 (Terminated)", "info"],
    ["[WARNING]  (18028) : All workers exited. Exiting... (130)", "info"],
    ["[WARNING]  (29571) : Current worker (29575) exited with code 0 (Exit)", "info"],
    ["[WARNING]  (29571) : All workers exited. Exiting... (0)", "info"],
    ["[NOTICE]   (18028) : Loading success.", "info"],
    ["[WARNING]  (18031) : Proxy b stopped (cumulated conns: FE: 0, BE: 0).", "debug"],
  ])("routine: %s", (line, level) => expect(haproxyLineLevel(line)).toBe(level));

  it.each([
    [
      '[WARNING]  (18031) : Server b/s1 is DOWN, reason: Layer4 connection problem, info: "Connection refused", check duration: 0ms. 1 active and 0 backup servers left.',
      "warn",
    ],
    ["[ALERT]    (18031) : backend 'b' has no server available!", "warn"],
    ["[ALERT]    (18028) : Current worker (18074) exited with code 139 (Segmentation fault)", "error"],
    ["[WARNING]  (18028) : Former worker (18031) exited with code 134 (Aborted)", "warn"],
    ["[WARNING]  (18028) : All workers exited. Exiting... (139)", "warn"],
    [
      "[ALERT]    (18028) : Starting frontend http: cannot bind socket (Address already in use) [127.0.0.1:8080]",
      "error",
    ],
  ])("to act on: %s", (line, level) => expect(haproxyLineLevel(line)).toBe(level));

  it("drops HAProxy's tag where the record's level says otherwise, and keeps it where they agree", () => {
    const logged = (line: string) => haproxyLogText(line, haproxyLineLevel(line));
    expect(
      logged("[WARNING]  (1934) : Server default_web_80/s3 enters drain state. 1 active and 0 backup servers online."),
    ).toBe("(1934) : Server default_web_80/s3 enters drain state. 1 active and 0 backup servers online.");
    expect(logged("[ALERT]    (18028) : Current worker (18074) exited with code 143 (Terminated)")).toBe(
      "(18028) : Current worker (18074) exited with code 143 (Terminated)",
    );
    expect(logged("[ALERT]    (18031) : backend 'b' has no server available!")).toBe(
      "(18031) : backend 'b' has no server available!",
    );
    expect(logged("[NOTICE]   (18028) : Loading success.")).toBe("[NOTICE]   (18028) : Loading success.");
    expect(logged("[WARNING]  (18028) : All workers exited. Exiting... (139)")).toBe(
      "[WARNING]  (18028) : All workers exited. Exiting... (139)",
    );
    expect(logged("[ALERT]    (18028) : Current worker (18074) exited with code 139 (Segmentation fault)")).toBe(
      "[ALERT]    (18028) : Current worker (18074) exited with code 139 (Segmentation fault)",
    );
  });
});
