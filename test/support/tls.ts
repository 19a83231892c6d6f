import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export interface TestPki {
  /** CA certificate (PEM) that signed the server and client certificates. */
  caFile: string;
  /** Server certificate + key in one PEM, as HAProxy's `crt` wants it. */
  serverPem: string;
  clientCert: string;
  clientKey: string;
  ca: string;
}

function openssl(args: string[], cwd: string): void {
  execFileSync("openssl", args, { cwd, stdio: "pipe" });
}

/** A throw-away CA with a server certificate for `serverName` and one client certificate, made with openssl. */
export function makePki(dir: string, serverName = "lb.test"): TestPki {
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  openssl(
    ["req", "-x509", ...ec, "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=servicelb test CA", "-days", "2"],
    dir,
  );
  for (const [name, cn] of [
    ["server", serverName],
    ["client", "client"],
  ] as const) {
    openssl(["req", ...ec, "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${cn}`], dir);
    writeFileSync(
      join(dir, `${name}.ext`),
      name === "server" ? `subjectAltName=DNS:${serverName}\n` : "extendedKeyUsage=clientAuth\n",
    );
    openssl(
      [
        "x509",
        "-req",
        "-in",
        `${name}.csr`,
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        `${name}.crt`,
        "-days",
        "2",
        "-extfile",
        `${name}.ext`,
      ],
      dir,
    );
  }
  const serverPem = join(dir, "server.pem");
  writeFileSync(
    serverPem,
    readFileSync(join(dir, "server.crt"), "utf8") + readFileSync(join(dir, "server.key"), "utf8"),
  );
  return {
    caFile: join(dir, "ca.crt"),
    serverPem,
    clientCert: join(dir, "client.crt"),
    clientKey: join(dir, "client.key"),
    ca: readFileSync(join(dir, "ca.crt"), "utf8"),
  };
}
