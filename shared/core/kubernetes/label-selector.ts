/**
 * Equality-based label selectors (`k=v`, `k==v`, `k!=v`, `k`, `!k`, comma = AND): the subset
 * the API server's `labelSelector` and kubectl's `-l` share. Set-based forms are refused rather
 * than half-supported, because a selector that silently matches more than intended exposes Services.
 */
export type LabelSelector = ReadonlyArray<
  | { op: "eq"; key: string; value: string }
  | { op: "neq"; key: string; value: string }
  | { op: "exists"; key: string }
  | { op: "absent"; key: string }
>;

const KEY = /^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;

export function parseLabelSelector(text: string): LabelSelector {
  const out: Array<LabelSelector[number]> = [];
  for (const raw of text.split(",")) {
    const term = raw.trim();
    if (term === "") continue;
    const m = /^(!?)\s*([^=!\s]+)\s*(?:(==|=|!=)\s*(\S*))?$/.exec(term);
    if (!m) throw new Error(`label selector term "${term}" is not k=v, k!=v, k or !k`);
    const [, bang, key = "", op, value = ""] = m;
    if (!KEY.test(key)) throw new Error(`label selector key "${key}" is not a valid label key`);
    if (op !== undefined && !VALUE.test(value))
      throw new Error(`label selector value "${value}" is not a valid label value`);
    if (bang && op !== undefined) throw new Error(`label selector term "${term}" mixes ! with an operator`);
    if (bang) out.push({ op: "absent", key });
    else if (op === undefined) out.push({ op: "exists", key });
    else out.push({ op: op === "!=" ? "neq" : "eq", key, value });
  }
  return out;
}

export function matchesSelector(selector: LabelSelector, labels: Readonly<Record<string, string>>): boolean {
  return selector.every((t) => {
    const has = Object.hasOwn(labels, t.key);
    switch (t.op) {
      case "eq":
        return has && labels[t.key] === t.value;
      case "neq":
        return !has || labels[t.key] !== t.value;
      case "exists":
        return has;
      case "absent":
        return !has;
      default:
        return t satisfies never;
    }
  });
}

/** The selector in the API server's `labelSelector` syntax. */
export function formatLabelSelector(selector: LabelSelector): string {
  return selector
    .map((t) =>
      t.op === "eq"
        ? `${t.key}=${t.value}`
        : t.op === "neq"
          ? `${t.key}!=${t.value}`
          : t.op === "exists"
            ? t.key
            : `!${t.key}`,
    )
    .join(",");
}
