import { Module, type DynamicModule, type INestApplicationContext, type Provider, type Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { overrideQueueForTesting } from 'nestjs-pg-queue/testing';

/** An app built as docs/testing.md builds one: its module (these imports and providers) through overrideQueueForTesting. */
export async function startTestingApp(imports: (Type | DynamicModule)[], providers: Provider[], mode: 'manual' | 'inline' = 'manual'): Promise<INestApplicationContext> {
  @Module({ imports, providers })
  class AppModule {}
  const moduleRef = await overrideQueueForTesting(Test.createTestingModule({ imports: [AppModule] }), { mode }).compile();
  moduleRef.useLogger(['error']);
  return moduleRef.init();
}
