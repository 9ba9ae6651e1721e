import type { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';

// The metadata key @Cron, @Interval and @Timeout set (@nestjs/schedule exports neither it nor its values).
const SCHEDULER_TYPE = 'SCHEDULER_TYPE';

/**
 * The app's provider and controller methods that carry @nestjs/schedule metadata, as Class.method: they
 * run only if the app imports ScheduleModule.forRoot() itself.
 */
export function scheduledMethods(discovery: DiscoveryService, scanner: MetadataScanner, reflector: Reflector): string[] {
  const found: string[] = [];
  for (const wrapper of [...discovery.getProviders(), ...discovery.getControllers()]) {
    const prototype = wrapper.instance ? Object.getPrototypeOf(wrapper.instance) : wrapper.metatype?.prototype;
    if (!prototype || typeof prototype !== 'object') continue;
    for (const methodName of scanner.getAllMethodNames(prototype)) {
      if (reflector.get(SCHEDULER_TYPE, prototype[methodName]) !== undefined) found.push(`${prototype.constructor?.name ?? 'anonymous'}.${methodName}`);
    }
  }
  return [...new Set(found)];
}
