# The Partner Data Service: one image for every role (`pds serve --role all|api|projector|dispatcher`).
FROM node:24-slim
WORKDIR /app
ENV NODE_ENV=production
# Two malloc arenas for the process's threads, not eight per core (docs/read-side.md, "Memory").
ENV MALLOC_ARENA_MAX=2
COPY package.json package-lock.json ./
# The image brings Node 24, so the `node` devDependency (which puts Node 24 on PATH for npm scripts on
# machines with an older Node) is not needed here, nor are the other dev tools: Node runs the .ts files
# itself (type stripping).
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY api ./api
COPY application ./application
COPY cli ./cli
COPY dispatcher ./dispatcher
COPY webhooks ./webhooks
COPY domain ./domain
COPY eventstore ./eventstore
COPY projections ./projections
# The data dir holds the embedded store and generated secrets when no external engine is configured:
# the service's user alone may read it (docs/operations.md, "Secrets").
RUN mkdir -p -m 700 /app/data && chown node:node /app/data
USER node
EXPOSE 8080
# On the port that serves the operational endpoints: PDS_OPS_PORT when set, else PORT.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=5 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PDS_OPS_PORT || process.env.PORT || 8080) + '/readyz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# A young generation of 2 x 16 MB instead of up to 128 MB under load, and V8 helper threads one per
# core beyond the first instead of four (docs/read-side.md, "Memory"; docs/operations.md, "Threads").
CMD ["node", "--scavenger-max-new-space-capacity-mb=8", "--v8-pool-size=0", "--heap-growing-percent=50", "cli/pds.ts", "serve", "--role", "all"]
