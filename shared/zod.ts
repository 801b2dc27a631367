/**
 * The zod the job schemas are written with: the package's own copy, as a
 * module to import whole (`import * as z from "leasehold/zod"`). A bundler
 * keeps of a namespace import only what the schemas use; esbuild cannot do
 * that for a namespace re-exported by name (`z` from "leasehold" or "zod"),
 * and bundles all of zod, its 40 locales too: about 750 kB that every cold
 * start compiles.
 */
export * from "zod";
