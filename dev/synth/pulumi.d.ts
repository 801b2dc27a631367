/**
 * The part of `@pulumi/pulumi` dev/synth/driver.ts uses. The package is SST's
 * platform's (.sst/platform/node_modules), not this repository's: the driver
 * is bundled next to the platform and imports it from there.
 */
declare module "@pulumi/pulumi" {
  interface Output<T> {
    apply<U>(fn: (value: T) => U): Output<U>;
  }
  export function output<T>(value: T): Output<unknown>;
  export const runtime: {
    setMocks(mocks: unknown, project?: string, stack?: string, preview?: boolean): Promise<void>;
    runInPulumiStack(init: () => Promise<unknown>): Promise<unknown>;
    disconnect(): Promise<void>;
  };
}
