#!/usr/bin/env node
// Generates src/types.gen.ts from Herald's OpenAPI document (internal/api/openapi.json): one
// exported type per schema of components.schemas, and a few named types for request and
// response bodies that the document writes inline in its paths.
//
//   node scripts/gen-types.mjs            write src/types.gen.ts
//   node scripts/gen-types.mjs --check    exit 1 if src/types.gen.ts differs from what the
//                                         document gives (the types drifted from the API)
//
// --openapi PATH and --out PATH read and write other files (the tests use them).

import { readFileSync, writeFileSync } from "node:fs";
import { dirname, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");

// Bodies the document writes inline in a path rather than as a component schema.
const INLINE = [
  { name: "SendBatchRequest", path: "/v1/notifications/batch", method: "post", body: "request", doc: "The body of POST /v1/notifications/batch." },
  { name: "SendBatchResponse", path: "/v1/notifications/batch", method: "post", body: "202", doc: "The answer of POST /v1/notifications/batch: one Accepted per request, in order." },
  { name: "UnreadCount", path: "/v1/users/{user}/inbox/unread-count", method: "get", body: "200", doc: "The answer of GET /v1/users/{user}/inbox/unread-count." },
  { name: "ReadAllResult", path: "/v1/users/{user}/inbox/read-all", method: "post", body: "200", doc: "The answer of POST /v1/users/{user}/inbox/read-all." },
];

function parseArgs(argv) {
  const args = { check: false, openapi: resolve(root, "../../internal/api/openapi.json"), out: resolve(root, "src/types.gen.ts") };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--check") args.check = true;
    else if (a === "--openapi") args.openapi = resolve(argv[++i] ?? "");
    else if (a === "--out") args.out = resolve(argv[++i] ?? "");
    else {
      console.error(`gen-types: unknown argument ${a}`);
      process.exit(2);
    }
  }
  return args;
}

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

function key(name) {
  return IDENT.test(name) ? name : JSON.stringify(name);
}

function doc(text, indent) {
  if (!text) return "";
  const lines = String(text).replaceAll("*/", "*\\/").split("\n");
  if (lines.length === 1) return `${indent}/** ${lines[0]} */\n`;
  return `${indent}/**\n${lines.map((l) => `${indent} * ${l}`.trimEnd()).join("\n")}\n${indent} */\n`;
}

function describe(schema) {
  const parts = [];
  if (schema.description) parts.push(schema.description);
  if (schema.default !== undefined) parts.push(`@defaultValue ${JSON.stringify(schema.default)}`);
  return parts.join("\n");
}

function refName(ref) {
  const m = /^#\/components\/schemas\/([A-Za-z0-9_]+)$/.exec(ref);
  if (!m) throw new Error(`unsupported $ref ${ref}`);
  return m[1];
}

function union(types) {
  const seen = [...new Set(types)];
  return seen.length === 0 ? "never" : seen.join(" | ");
}

function literal(v) {
  if (v === null || typeof v === "string" || typeof v === "number" || typeof v === "boolean") return JSON.stringify(v);
  return "unknown";
}

// paren wraps a union so that it can take [] or & after it.
function paren(t) {
  return /[|&]/.test(t) && !/^[{(]/.test(t) ? `(${t})` : t;
}

class Generator {
  constructor(schemas) {
    this.schemas = schemas;
  }

  type(s, indent) {
    if (s === true || s === undefined) return "unknown";
    if (s === false) return "never";
    if (s.$ref) {
      const name = refName(s.$ref);
      if (!(name in this.schemas)) throw new Error(`$ref to a missing schema ${s.$ref}`);
      return name;
    }
    if (s.const !== undefined) return literal(s.const);
    if (Array.isArray(s.enum)) return union(s.enum.map(literal));
    const alts = s.oneOf ?? s.anyOf;
    const types = s.type === undefined ? [] : Array.isArray(s.type) ? s.type : [s.type];
    if (alts && !types.length && !s.properties) {
      if (alts.every((a) => a.$ref || a.type || a.enum || a.const !== undefined)) return union(alts.map((a) => this.type(a, indent)));
      return "unknown";
    }
    if (!types.length) {
      if (s.properties || s.additionalProperties !== undefined) return this.object(s, indent);
      return s.items ? `${paren(this.type(s.items, indent))}[]` : "unknown";
    }
    return union(types.map((t) => this.single(t, s, indent)));
  }

  single(t, s, indent) {
    switch (t) {
      case "string":
        return "string";
      case "integer":
      case "number":
        return "number";
      case "boolean":
        return "boolean";
      case "null":
        return "null";
      case "array":
        return `${paren(this.type(s.items, indent))}[]`;
      case "object":
        return this.object(s, indent);
      default:
        return "unknown";
    }
  }

  object(s, indent) {
    const props = s.properties ?? {};
    const names = Object.keys(props);
    const ap = s.additionalProperties;
    let map = null;
    if (ap !== undefined && ap !== false && ap !== true) {
      const value = this.type(ap, indent);
      const keys = s.propertyNames && Array.isArray(s.propertyNames.enum) ? union(s.propertyNames.enum.map(literal)) : null;
      map = keys ? `Partial<Record<${keys}, ${value}>>` : `Record<string, ${value}>`;
    }
    if (!names.length) {
      if (map) return map;
      return ap === false ? "Record<string, never>" : "Record<string, unknown>";
    }
    const required = new Set(s.required ?? []);
    const inner = indent + "  ";
    let body = "{\n";
    for (const name of names) {
      const p = props[name];
      body += doc(describe(p), inner);
      body += `${inner}${key(name)}${required.has(name) ? "" : "?"}: ${this.type(p, inner)};\n`;
    }
    if (map) body += `${inner}[key: string]: unknown;\n`;
    body += `${indent}}`;
    // anyOf / oneOf of branches that only require some of the properties: at least one of them.
    const alts = s.anyOf ?? s.oneOf;
    if (alts) {
      const simple = alts.every((a) => Object.keys(a).every((k) => k === "required") && a.required.every((r) => r in props));
      if (!simple) return `${body} & unknown`;
      const branches = alts.map((a) => `{ ${a.required.map((r) => `${key(r)}: ${this.type(props[r], inner)}`).join("; ")} }`);
      return `${body} & (${branches.join(" | ")})`;
    }
    return body;
  }
}

export function generate(openapi) {
  const schemas = openapi?.components?.schemas;
  if (!schemas || typeof schemas !== "object") throw new Error("the document has no components.schemas");
  const g = new Generator(schemas);
  let out =
    "// Code generated by scripts/gen-types.mjs from internal/api/openapi.json; DO NOT EDIT.\n" +
    "// Run `npm run gen-types` after changing the OpenAPI document; `npm run check-types` fails\n" +
    "// while this file and the document disagree.\n";
  if (openapi.info?.version) out += `//\n// OpenAPI document version ${openapi.info.version}.\n`;
  for (const [name, schema] of Object.entries(schemas)) {
    out += "\n" + doc(describe(schema), "");
    out += `export type ${name} = ${g.type(schema, "")};\n`;
  }
  for (const it of INLINE) {
    const op = openapi.paths?.[it.path]?.[it.method];
    if (!op) throw new Error(`${it.method.toUpperCase()} ${it.path} is not in the document (needed for ${it.name})`);
    const content = it.body === "request" ? op.requestBody?.content : op.responses?.[it.body]?.content;
    const schema = content?.["application/json"]?.schema;
    if (!schema) throw new Error(`${it.method.toUpperCase()} ${it.path} has no application/json ${it.body === "request" ? "request body" : it.body + " response"} (needed for ${it.name})`);
    out += "\n" + doc(it.doc, "");
    out += `export type ${it.name} = ${g.type(schema, "")};\n`;
  }
  return out;
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  let openapi;
  try {
    openapi = JSON.parse(readFileSync(args.openapi, "utf8"));
  } catch (err) {
    console.error(`gen-types: cannot read the OpenAPI document ${args.openapi}: ${err.message}`);
    process.exit(2);
  }
  let text;
  try {
    text = generate(openapi);
  } catch (err) {
    console.error(`gen-types: ${err.message}`);
    process.exit(2);
  }
  const shown = relative(process.cwd(), args.out) || args.out;
  if (!args.check) {
    writeFileSync(args.out, text);
    console.log(`gen-types: wrote ${shown}`);
    return;
  }
  let current = null;
  try {
    current = readFileSync(args.out, "utf8");
  } catch {
    // compared below as missing
  }
  if (current === text) {
    console.log(`gen-types: ${shown} matches ${relative(process.cwd(), args.openapi) || args.openapi}`);
    return;
  }
  if (current === null) {
    console.error(`gen-types: ${shown} is missing; run \`npm run gen-types\``);
    process.exit(1);
  }
  const a = current.split("\n");
  const b = text.split("\n");
  let line = 0;
  while (line < a.length && line < b.length && a[line] === b[line]) line++;
  console.error(
    `gen-types: ${shown} is out of date with the OpenAPI document ${args.openapi}.\n` +
      `  first difference at line ${line + 1}:\n` +
      `    file:      ${a[line] ?? "<end of file>"}\n` +
      `    generated: ${b[line] ?? "<end of file>"}\n` +
      "Run `npm run gen-types` and review the change to the client's types.",
  );
  process.exit(1);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
