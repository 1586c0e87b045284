// The jobs list's page size (ui/src/pages/jobs.tsx PAGE_SIZE).
export const PAGE_SIZE_FOR_TESTS = 25;
