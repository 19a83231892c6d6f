import { describe, expect, it } from "vitest";
import type { ApplyDecision } from "../../../shared/agent/decide.js";
import { PATTERN_SECTION, renderPatternSection } from "../../../shared/core/haproxy-config/pattern-files.js";
import { commandText } from "../../../shared/core/haproxy-config/runtime-plan.js";
import { decideTexts as decideApply } from "../../support/haproxy-config.js";

// What runs and what arrived in, the agent's way of taking it out: exact runtime API commands,
// or the reason for a reload that the agent logs.

const config = (slots: Array<string | null>, extra = "") => `global
    master-worker
    stats socket /run/haproxy/admin.sock mode 600 level admin
${extra}
backend default_web_80 from http_defaults
    balance roundrobin
${slots.map((a, i) => `    server s${i + 1} ${a ?? "127.0.0.1:1 disabled"}`).join("\n")}
`;

const A = "10.0.0.1:8080";
const B = "10.0.0.2:8080";
const C = "10.0.0.3:8080";
const D = "10.0.0.4:8080";

/** The same config with allow lists of Services (`[service, entries]`), as the renderer carries them. */
const lists = (base: string, ...files: Array<[string, string[]]>) =>
  `${base.replace(
    "    balance roundrobin\n",
    `$&${files.map(([svc]) => `    acl src_allowed src -f patterns/default.${svc}.allow\n`).join("")}`,
  )}${renderPatternSection(files.map(([svc, entries]) => ({ path: `patterns/default.${svc}.allow`, entries })))}`;

function show(d: ApplyDecision): string | string[] {
  if (d.kind === "runtime")
    return [
      ...d.commands.map(commandText),
      ...d.files.map((f) => `swap ${f.path}: ${f.entries.join(" ")}`),
      ...d.emptying.map(commandText),
    ];
  return d.kind === "reload" ? `reload: ${d.reason}` : "identical";
}

describe("decideApply", () => {
  it.each<[string, { text: string; known: boolean } | null, string, string | string[]]>([
    ["nothing runs yet", null, config([A]), "reload: HAProxy runs no config yet"],
    ["the same bytes", { text: config([A, null]), known: true }, config([A, null]), "identical"],
    [
      "slots not known after a failed undo, even for the same bytes",
      { text: config([A, null]), known: false },
      config([A, null]),
      "reload: the live server slots are not known (undoing runtime changes failed)",
    ],
    [
      "no stats socket",
      { text: config([A, null]).replace(/ {4}stats socket.*\n/, ""), known: true },
      config([B, null]).replace(/ {4}stats socket.*\n/, ""),
      "reload: the running config has no stats socket for the runtime API",
    ],
    [
      "a structural change",
      { text: config([A, null]), known: true },
      config([A, null], "    maxconn 100"),
      'reload: line 4 differs: "" -> "    maxconn 100"',
    ],
    [
      "slots added to the backend (it grew): added in maintenance, the one with an endpoint readied",
      { text: config([A, null]), known: true },
      config([A, null, B, null]),
      [
        "add server default_web_80/s3 10.0.0.2:8080",
        "add server default_web_80/s4 127.0.0.1:1",
        "set server default_web_80/s3 state ready",
      ],
    ],
    [
      "scale up",
      { text: config([A, null, null, null]), known: true },
      config([A, null, B, null]),
      ["set server default_web_80/s3 addr 10.0.0.2 port 8080", "set server default_web_80/s3 state ready"],
    ],
    [
      "scale down",
      { text: config([A, null, B, null]), known: true },
      config([A, null, null, null]),
      [
        "set server default_web_80/s3 state drain",
        "set server default_web_80/s3 state maint",
        "set server default_web_80/s3 addr 127.0.0.1 port 1",
      ],
    ],
    [
      "the only pod replaced in place",
      { text: config([A, null]), known: true },
      config([B, null]),
      [
        "set server default_web_80/s2 addr 10.0.0.2 port 8080",
        "set server default_web_80/s2 state ready",
        "set server default_web_80/s1 state drain",
        "set server default_web_80/s1 state maint",
        "set server default_web_80/s1 addr 10.0.0.2 port 8080",
        "set server default_web_80/s1 state ready",
        "set server default_web_80/s2 state drain",
        "set server default_web_80/s2 state maint",
        "set server default_web_80/s2 addr 127.0.0.1 port 1",
      ],
    ],
    [
      "every slot taken and one replaced in place",
      { text: config([A, B, C, D]), known: true },
      config([A, B, C, "10.0.0.9:8080"]),
      "reload: default_web_80/s4 moves from 10.0.0.4:8080 to 10.0.0.9:8080 and the backend has no free slot to carry the new address meanwhile",
    ],
    [
      "an allow list changed: swapped through the runtime API, no slot touched",
      { text: lists(config([A, null]), ["web", ["10.0.0.0/8"]]), known: true },
      lists(config([A, null]), ["web", ["10.0.0.0/8", "fd00::/8"]]),
      ["swap patterns/default.web.allow: 10.0.0.0/8 fd00::/8"],
    ],
    [
      "a list shortened: the section ends sooner, still a swap",
      { text: lists(config([A, null]), ["web", ["10.0.0.0/8", "192.168.0.0/16"]]), known: true },
      lists(config([A, null]), ["web", ["192.168.0.0/16"]]),
      ["swap patterns/default.web.allow: 192.168.0.0/16"],
    ],
    [
      "a list and a slot changed together: slots first, then the list",
      { text: lists(config([A, null, null, null]), ["api", ["10.0.0.1"]], ["web", ["10.0.0.0/8"]]), known: true },
      lists(config([A, null, B, null]), ["api", ["10.0.0.1"]], ["web", ["172.16.0.0/12"]]),
      [
        "set server default_web_80/s3 addr 10.0.0.2 port 8080",
        "set server default_web_80/s3 state ready",
        "swap patterns/default.web.allow: 172.16.0.0/12",
      ],
    ],
    [
      "the last pod gone with the list that admits to it: the list first, then the backend emptied",
      { text: lists(config([A, null]), ["web", ["10.0.0.0/8"]]), known: true },
      lists(config([null, null]), ["web", ["172.16.0.0/12"]]),
      [
        "swap patterns/default.web.allow: 172.16.0.0/12",
        "set server default_web_80/s1 state drain",
        "set server default_web_80/s1 state maint",
        "set server default_web_80/s1 addr 127.0.0.1 port 1",
      ],
    ],
    [
      "a list added: a new acl line and file, only a reload reads it",
      { text: config([A, null]), known: true },
      lists(config([A, null]), ["web", ["10.0.0.0/8"]]),
      "reload: pattern file patterns/default.web.allow added",
    ],
    [
      "a list removed",
      { text: lists(config([A, null]), ["web", ["10.0.0.0/8"]]), known: true },
      config([A, null]),
      "reload: pattern file patterns/default.web.allow removed",
    ],
    [
      "a list changed beside a structural change: the reload takes both",
      { text: lists(config([A, null]), ["web", ["10.0.0.0/8"]]), known: true },
      lists(config([A, null], "    maxconn 100"), ["web", ["fd00::/8"]]),
      'reload: line 4 differs: "" -> "    maxconn 100"',
    ],
    [
      "a hostile line in the new pattern section never becomes a command",
      { text: lists(config([A, null]), ["web", ["10.0.0.0/8"]]), known: true },
      lists(config([A, null]), ["web", ["10.0.0.0/8"]]).replace("#| 10.0.0.0/8", "#| 10.0.0.0/8;shutdown sessions"),
      'reload: the new config\'s pattern section line 2: "10.0.0.0/8;shutdown sessions" is not an address or CIDR',
    ],
    [
      "a path outside the pattern directory never becomes a file",
      { text: lists(config([A, null]), ["web", ["10.0.0.0/8"]]), known: true },
      `${config([A, null])}${PATTERN_SECTION}\n#> ../../etc/passwd\n#| 10.0.0.0/8\n`,
      'reload: the new config\'s pattern section line 1: "../../etc/passwd" is not a pattern file path',
    ],
  ])("%s", (_name, live, next, expected) => {
    expect(show(decideApply(live, next))).toEqual(expected);
  });

  it("says which socket and how many slots a runtime change touches", () => {
    const d = decideApply({ text: config([A, null, null, null]), known: true }, config([null, B, C, null]));
    expect(d).toMatchObject({ kind: "runtime", socket: "/run/haproxy/admin.sock", slots: 3 });
  });
});
