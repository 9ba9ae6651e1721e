import { defineQueue } from 'nestjs-pg-queue';
import { firstProblem, integerProblem } from './payload-checks.js';

/** Payload of the `thumbnails` queue. */
export interface ThumbnailPayload {
  imageId: number;
  width: number;
}

/** The `thumbnails` queue, typed and validated (see emails.queue.ts). */
export const Thumbnails = defineQueue<ThumbnailPayload>('thumbnails', {
  validate: (payload) =>
    firstProblem(payload, '{ imageId, width }', (p) => [integerProblem('imageId', p.imageId, 0, Number.MAX_SAFE_INTEGER), integerProblem('width', p.width, 1, 4_096)]),
});
